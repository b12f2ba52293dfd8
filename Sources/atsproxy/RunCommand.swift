import ATSPolicy
import ArgumentParser
import CaptureExport
import CaptureStore
import Foundation
import ProxyCore
import ProxyEventLoop
import ProxyServer
import RuleStage
import ProxyTrace

/// `atsproxy run`: the proxy. Explicit HTTP/HTTPS proxy (absolute-form requests and CONNECT) that intercepts TLS
/// with its own CA and judges every upstream connection by the app's ATS policy.
struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the intercepting proxy, applying an app's ATS policy to every upstream connection.",
        discussion: """
            Point a client at it (curl -x http://127.0.0.1:8080 --cacert certs/atsproxy-ca.pem https://…, \
            HTTPS_PROXY=http://127.0.0.1:8080, or the device's Wi-Fi proxy) after trusting the CA that the first \
            run creates in --ca-dir. Connections the policy refuses fail in the client with the app's error codes \
            (--ats enforce), or pass with X-ATS-* headers (--ats annotate).
            """)

    @Option(help: "Address and port to listen on. A non-loopback address also needs --allow-lan.")
    var listen: String = "127.0.0.1:8080"

    @Flag(
        name: .customLong("allow-lan"),
        help: "Allow listening on a non-loopback address; needs proxy credentials or --allow-open-proxy.")
    var allowLAN = false

    @Flag(
        name: .customLong("allow-open-proxy"),
        help: "With --allow-lan, run without credentials: anyone who reaches the address can use the proxy.")
    var allowOpenProxy = false

    @Option(
        help: ArgumentHelp(
            "Require Proxy-Authorization: Basic credentials USER:PASSWORD. Other users of this machine see it in "
                + "ps: prefer --auth-file or $\(ProxyCredentialSource.environmentVariable).",
            valueName: "USER:PASSWORD"))
    var auth: String?

    @Option(
        name: .customLong("auth-file"),
        help: ArgumentHelp("Read the proxy credentials USER:PASSWORD from the first line of FILE.", valueName: "FILE"))
    var authFile: String?

    var credentialSource: ProxyCredentialSource {
        ProxyCredentialSource(option: auth, file: authFile, environment: ProcessInfo.processInfo.environment)
    }

    @Option(help: "The app's ATS policy: a plist, Info.plist, .app or .ipa. Without it, Apple's defaults apply.")
    var plist: String?

    // Numeric options take the next word whatever it looks like (.unconditional), so `--threads -3` reaches
    // validate() and its range message; by default argument-parser reads `-3` as a flag ("Missing value").
    @Option(
        name: .customLong("ios"), parsing: .unconditional,
        help: ArgumentHelp(
            "iOS version whose ATS behaviour is simulated (9 or later; a version takes the newest of the bands 9, "
                + "10, 14, 17, 26 not after it, e.g. 16 → 14; the banner names the band)."))
    var iosVersion: Int = IOSProfile.newest.rawValue

    @OptionGroup var readings: PolicyReadingOptions

    @Option(
        help: "enforce: block violating connections; annotate: add X-ATS-* headers only; off: plain proxy; mirror: show the device each upstream as weak as it is (version, suite, leaf flaws) and record what the device did (docs/mirror.md).")
    var ats: ATSModeArgument = .enforce

    @Option(help: "How enforce blocks: tls (fail the client's handshake as the app's would) or http (502/403 answers).")
    var block: BlockStyleArgument = .tls

    @Option(
        name: .customLong("upstream-alpn"),
        help: "What the upstream is offered by ALPN: mirror (what the client offered; an origin that refuses it is retried with h2 and http/1.1) or ios (h2 and http/1.1, as URLSession; HTTP/1.1 clients are translated).")
    var upstreamALPN: UpstreamALPN = .mirror

    @Option(
        name: .customLong("upstream-resumption"),
        help: "Resume upstream TLS sessions, as iOS does: on (a session to the same origin, address, ALPN offer and requirements is offered for up to 10 minutes; a resumed connection is judged on the certificates its session's full handshake received, the policy evaluated again each time) or off (a full handshake every time).")
    var upstreamResumption: UpstreamResumption = .on

    @Flag(
        name: .customLong("insecure-upstream"),
        help: ArgumentHelp(
            "With --ats off: relay upstreams whose certificate the device would not trust (unknown root, wrong "
                + "name). The client then sees a forged or broken server as trusted. Each one is a notice."))
    var insecureUpstream = false

    @Option(name: .customLong("trust-ca"), help: "Extra trusted root for upstream certificates (PEM), repeatable.")
    var trustCA: [String] = []

    @Option(
        help: ArgumentHelp(
            "Connect to ADDR:PORT for HOST, keeping the request's host for SNI, Host and certificate checks. HOST as "
                + "for --passthrough. Repeatable.",
            valueName: "HOST=ADDR:PORT"))
    var map: [String] = []

    @Option(
        help: ArgumentHelp(
            "Tunnel HOST without interception: a host, *.example.com (every name below example.com, not "
                + "example.com itself) or .example.com (example.com and every name below it). Repeatable.",
            valueName: "HOST"))
    var passthrough: [String] = []

    // Optional, so that the help shows "one per core" rather than this machine's count appended after it.
    @Option(parsing: .unconditional, help: "Event-loop threads, 1 to 256 (default: one per core).")
    var threads: Int?

    /// `--threads`' upper bound: each loop holds an epoll and an eventfd descriptor and a thread, and a count in
    /// the thousands runs out of descriptors before the first connection ("epoll_create1 failed").
    static let maxThreads = 256

    @Option(
        name: .customLong("yields-before-sleep"), parsing: .unconditional,
        help: ArgumentHelp(
            "How many times a busy event-loop thread yields the CPU and polls again before it sleeps (0 to 1000; "
                + "0 sleeps at once): cheaper than being woken when clients and origins share the machine's cores. "
                + "Yielding is suspended for a second whenever yields take milliseconds (a CPU-bound task shares "
                + "the cores).",
            valueName: "N"))
    var yieldsBeforeSleep: Int = EventLoopGroup.Configuration.defaultYieldsBeforeSleeping

    @Option(name: .customLong("ca-dir"), help: "Where the proxy's CA lives (created on first run).")
    var caDir: String = "certs"

    @Option(
        parsing: .unconditional,
        help: "CFNetwork-style diagnostics level, 0 (off) to 3 (default: $CFNETWORK_DIAGNOSTICS, else 0).")
    var diagnostics: Int?

    @Option(name: .customLong("log-json"), help: "Write one JSON object per event to FILE.")
    var logJSON: String?

    @Option(
        name: .customLong("handshake-timeout"), parsing: .unconditional,
        help: "Seconds an upstream may take to complete its TLS handshake; then the client gets -1001 (timed out).")
    var handshakeTimeout: Double = 15

    @Option(
        name: .customLong("client-timeout"), parsing: .unconditional,
        help: ArgumentHelp(
            "Seconds a client may take over each request head (from its first byte), its TLS ClientHello after "
                + "CONNECT, its TLS handshake, and between two bytes of a request body; then 408 or a close.",
            valueName: "SECONDS"))
    var clientTimeout: Double = 30

    @Option(
        name: .customLong("response-timeout"), parsing: .unconditional,
        help: ArgumentHelp(
            "Seconds an upstream may take from a request's end to its first response byte; then the client gets 504 "
                + "with -1001 (timed out).",
            valueName: "SECONDS"))
    var responseTimeout: Double = 60

    @Option(
        name: .customLong("shutdown-timeout"), parsing: .unconditional,
        help: ArgumentHelp(
            "Seconds Ctrl-C or SIGTERM lets exchanges in flight finish before they are cut off (0 to 3600; a second "
                + "Ctrl-C cuts them at once).",
            valueName: "SECONDS"))
    var shutdownTimeout: Double = 5

    @Flag(help: "No per-exchange console lines (notices still go to stderr).")
    var quiet = false

    @OptionGroup var captureOptions: CaptureOptions

    @OptionGroup var webOptions: WebOptions

    @OptionGroup var deviceOptions: DeviceOptions

    @OptionGroup var pinning: PinningOptions

    @OptionGroup var modeOptions: ModeOptions

    @OptionGroup(title: "Rules that change traffic") var ruleOptions: RuleOptions

    /// Usage errors are found here, not in `run()`: ArgumentParser prints `run`'s usage only for errors thrown
    /// while parsing; from `run()` it would print the root command's.
    func validate() throws {
        guard IOSProfile.band(for: iosVersion) != nil else {
            throw ValidationError("--ios must be 9 or later (got \(iosVersion))")
        }
        if let threads, !(1...Self.maxThreads).contains(threads) {
            throw ValidationError("--threads takes 1 to \(Self.maxThreads) (got \(threads))")
        }
        guard (0...1000).contains(yieldsBeforeSleep) else {
            throw ValidationError("--yields-before-sleep takes 0 to 1000 (got \(yieldsBeforeSleep))")
        }
        if let diagnostics, !(0...3).contains(diagnostics) {
            throw ValidationError("--diagnostics takes 0 (off) to 3 (got \(diagnostics))")
        }
        guard handshakeTimeout > 0, handshakeTimeout <= 3600 else {
            throw ValidationError("--handshake-timeout takes seconds, more than 0 and at most 3600")
        }
        if insecureUpstream && ats != .off {
            throw ValidationError(
                "--insecure-upstream goes with --ats off only: enforce and annotate judge the certificate as the "
                    + "device does (annotate relays it anyway, with the violation in X-ATS-* headers)")
        }
        guard clientTimeout > 0, clientTimeout <= 3600 else {
            throw ValidationError("--client-timeout takes seconds, more than 0 and at most 3600 (got \(clientTimeout))")
        }
        guard responseTimeout > 0, responseTimeout <= 86_400 else {
            throw ValidationError(
                "--response-timeout takes seconds, more than 0 and at most 86400 (got \(responseTimeout))")
        }
        guard (0...3600).contains(shutdownTimeout) else {
            throw ValidationError("--shutdown-timeout takes seconds, 0 to 3600 (got \(shutdownTimeout))")
        }
        // Only the explicit proxy serves whoever reaches it: a transparent listener serves connections this host's
        // own firewall redirected (one straight to its port is refused), so it needs neither --allow-lan nor --auth.
        let host = try modeOptions.listeners(listen: Self.parseListen(listen)).regular?.0 ?? "127.0.0.1"
        let credentials = try credentialSource.credentials()
        if !Self.isLoopback(host) && !allowLAN {
            throw ValidationError(
                "\(host) is not a loopback address: an open proxy on the network is a hole. "
                    + "Add --allow-lan (and --auth-file FILE with USER:PASSWORD) to listen there.")
        }
        if !Self.isLoopback(host) && credentials == nil && !allowOpenProxy {
            throw ValidationError(
                "--allow-lan without proxy credentials is an open proxy for everyone on the network. Give "
                    + "--auth-file FILE (or $\(ProxyCredentialSource.environmentVariable), or --auth) with USER:PASSWORD, "
                    + "or add --allow-open-proxy to run without.")
        }
        // Here rather than in CaptureOptions: --web and --har capture too (to a temporary file), and take the cap.
        if captureOptions.captureBodies != nil && captureOptions.capture == nil && webOptions.web == nil
            && captureOptions.har == nil
        {
            throw ValidationError("--capture-bodies goes with --capture (or --web, or --har)")
        }
        if let (webHost, _) = try webOptions.address() {
            try WebOptions.checkExposure(
                host: webHost, allowLAN: allowLAN, hasCredentials: credentials != nil, allowOpenProxy: allowOpenProxy)
        }
        do {
            _ = try HostMapping.parsingAll(map)
            _ = try HostPattern.parsingAll(passthrough, option: "--passthrough")
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The proxy, in steps: what the options settle, where it writes (log, capture), the policy and the CA, what
    /// sessions share, the listeners, the web view, the banner; then it serves until a signal stops it. Every way
    /// out after the capture was opened goes through `RunOutputs.end()`, its one cleanup path.
    func run() throws {
        let modes = try modeOptions.listeners(listen: Self.parseListen(listen))
        if modeOptions.printNFT, let transparent = modes.transparent {
            print(NFTRuleset.text(interface: modeOptions.devicesInterface, port: transparent.1), terminator: "")
            return
        }
        Self.raiseDescriptorLimit()
        let start = try RunStart(self, modes: modes)
        // Opened before anything is created on disk (the CA), so a bad path fails first and alone.
        let outputs = try RunOutputs.open(self, start)
        defer { outputs.end() }
        let policy = try RunPolicy(self, profile: start.profile)
        let authorities = try RunAuthorities(self)
        let (environment, onboarding) = try self.environment(start, policy, authorities, outputs)
        let rulesWatcher = environment.rules.flatMap { book in
            ruleOptions.rulesFile.map { path in
                RulesFileWatcher(book: book, path: path) { ProxyLogSink.writeToStandardError("atsproxy: " + $0 + "\n") }
            }
        }
        defer { withExtendedLifetime(rulesWatcher) {} }
        let listeners = try RunListeners(self, start, environment: environment, onboarding: onboarding, log: outputs.log)
        let webLine = try RunWebView.open(
            self, start, policy, listeners, environment: environment, outputs: outputs)
        outputs.listening = true
        FileHandle.standardOutput.write(Data(
            banner(start, policy, authorities, listeners, outputs: outputs, webLine: webLine).utf8))
        if insecureUpstream {
            ProxyLogSink.writeToStandardError(
                "atsproxy: warning: --insecure-upstream: upstream certificates are not verified; a forged server "
                    + "reaches clients re-signed by the proxy's CA, which they trust\n")
        }
        listeners.waitForShutdown()
        outputs.log.flushAll()
        if ats == .mirror, let summary = environment.mirrorTally.summary(compared: environment.mirrorComparesPolicy) {
            ProxyLogSink.writeToStandardError(summary)
        }
        outputs.endCapture()
        if let har = captureOptions.har, let capture = outputs.capture {
            try writeHAR(har, from: capture)
        }
    }

    /// `--har`: this run's exchanges (a capture file may hold earlier runs) as HAR, once the capture is closed.
    private func writeHAR(_ output: String, from capture: CaptureSink) throws {
        do {
            let reader = try CaptureReader(path: capture.path)
            let document = HARDocument(
                creatorVersion: ATSProxyCommand.configuration.version, filter: CaptureFilter(runID: capture.runID))
            let written = Result { () throws(HARFileError) in try HARFile.write(document, from: reader, to: output) }
            try reader.close()
            let count = try written.get()
            ProxyLogSink.writeToStandardError("atsproxy: --har: \(HARFile.entries(count)) written to \(output)\n")
        } catch {
            throw failure("atsproxy run: error: --har: \(error)")
        }
    }

    /// What exchanges record beyond their console line: heads and bodies up to the limit for a capture; heads
    /// alone for `--diagnostics 2` and up, whose records show the response headers. A capture with no trace on the
    /// console gets each exchange's own trace records rebuilt when it is read, rather than made and stored.
    static func recording(captureBodyLimit: Int?, level: Int) -> RecordingOptions? {
        if let captureBodyLimit {
            return RecordingOptions(bodyLimit: captureBodyLimit, rebuildsExchangeTraces: level == 0)
        }
        return level >= 2 ? RecordingOptions(bodyLimit: 0) : nil
    }

    /// A new capture file in the system's temporary folder, for `--web` or `--har` without `--capture`.
    static func temporaryCapturePath() -> String {
        let folder = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        return (folder as NSString).appendingPathComponent(
            "atsproxy-web-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).atscap")
    }

    /// The diagnostics level: `--diagnostics`, else `CFNETWORK_DIAGNOSTICS` (0…3), else 0. The warning, when set,
    /// says how a variable value that is not a level from 0 to 3 was used instead (clamped, or off).
    static func diagnosticsLevel(option: Int?, environment: String?) -> (level: Int, warning: String?) {
        if let option { return (option, nil) }
        guard let raw = environment, !raw.isEmpty else { return (0, nil) }
        guard let value = Int(raw) else {
            return (0, "CFNETWORK_DIAGNOSTICS='\(raw)' is not a level from 0 to 3; diagnostics are off")
        }
        let level = max(0, min(3, value))
        guard level == value else {
            let off = level == 0 ? " (off)" : ""
            return (level, "CFNETWORK_DIAGNOSTICS=\(value) is outside 0 to 3; using level \(level)\(off)")
        }
        return (level, nil)
    }

    /// Raises the soft limit on open descriptors to the hard one (as Go's runtime does): each proxied connection
    /// takes two, and Debian's default soft limit of 1,024 would cap the proxy near 500 clients. When it still runs
    /// out, each listener's reserve descriptor answers new clients 503.
    static func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = min(limit.rlim_max, 1 << 20)
        guard limit.rlim_cur < wanted else { return }
        limit.rlim_cur = wanted
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)  // best effort: the old limit still works
    }

    /// The `USER:PASSWORD@` of the banner's proxy URL: the real user name, percent-encoded where URL or shell would
    /// read a character otherwise, and a placeholder, never the password; empty without `--auth`.
    static func proxyUserInfo(_ credentials: ProxyCredentials?) -> String {
        guard let credentials else { return "" }
        let plain = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~".utf8)
        let user = credentials.user.utf8.map { byte in
            plain.contains(byte) ? String(UnicodeScalar(byte)) : String(format: "%%%02X", byte)
        }
        return user.joined() + ":PASSWORD@"
    }

    /// Splits `host:port`, `[v6]:port` or a bare port. Port 0 is allowed: the system picks a free port, which the
    /// banner shows.
    static func parseListen(_ text: String) throws -> (String, UInt16) {
        func isNumber(_ s: Substring) -> Bool { !s.isEmpty && s.allSatisfy { $0.isASCII && $0.isNumber } }
        // Named like --map's port errors, with this option's range.
        func port(_ portText: Substring) throws -> UInt16 {
            guard !portText.isEmpty else {
                throw ValidationError("--listen '\(text)': the port is missing after ':' (HOST:PORT)")
            }
            guard isNumber(portText) else {
                throw ValidationError("--listen '\(text)': the port '\(portText)' is not a number")
            }
            guard let port = UInt16(portText) else {
                throw ValidationError(
                    "--listen '\(text)': the port \(portText) is out of range (0–65535; 0 picks a free port)")
            }
            return port
        }
        if isNumber(Substring(text)) { return ("127.0.0.1", try port(Substring(text))) }
        guard let colon = text.lastIndex(of: ":") else {
            throw ValidationError("--listen expects HOST:PORT, got '\(text)'")
        }
        let number = try port(text[text.index(after: colon)...])
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "127.0.0.1" : host, number)
    }

    /// Why the proxy cannot listen, naming the address (`bind failed: …` alone leaves the user guessing which
    /// one) and, for the usual causes, what to do.
    static func listenFailure(_ error: IOError, host: String, port: UInt16) -> String {
        let address = "\(host.contains(":") ? "[\(host)]" : host):\(port)"
        let reason = String(cString: strerror(error.errnoCode))
        switch error.errnoCode {
        case EADDRINUSE:
            return "cannot listen on \(address): \(reason) (another program, maybe another atsproxy, uses that port; "
                + "pick another with --listen)"
        case EADDRNOTAVAIL:
            return "cannot listen on \(address): \(reason) (no network interface of this machine has that address)"
        case EACCES:
            return "cannot listen on \(address): \(reason) (ports below 1024 need privileges; pick another with "
                + "--listen)"
        default:
            return "cannot listen on \(address): \(error)"
        }
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}

/// `--ats` values.
enum ATSModeArgument: String, ExpressibleByArgument, CaseIterable {
    case enforce, annotate, off, mirror
    var mode: ATSMode { ATSMode(rawValue: rawValue) ?? .enforce }
}

/// `--block` values.
enum BlockStyleArgument: String, ExpressibleByArgument, CaseIterable {
    case tls, http
    var style: BlockStyle { BlockStyle(rawValue: rawValue) ?? .tls }
}

extension UpstreamALPN: ExpressibleByArgument {}
extension UpstreamResumption: ExpressibleByArgument {}
