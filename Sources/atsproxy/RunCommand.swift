import ATSLint
import ATSReport
import ATSPolicy
import ArgumentParser
import CaptureExport
import CaptureStore
import Foundation
import PolicyLoader
import ProxyCore
import ProxyEventLoop
import ProxyServer
import ProxyTrace
import Synchronization
import TLSCore
import WebView

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

    func run() throws {
        let modes = try modeOptions.listeners(listen: Self.parseListen(listen))
        if modeOptions.printNFT, let transparent = modes.transparent {
            print(NFTRuleset.text(interface: modeOptions.devicesInterface, port: transparent.1), terminator: "")
            return
        }
        Self.raiseDescriptorLimit()
        // The first listener: the explicit proxy's, else the transparent one (the other is opened after it).
        guard let (host, port) = modes.regular ?? modes.transparent else { throw ExitCode.validationFailure }
        let credentials = try credentialSource.credentials()
        if modes.regular != nil && !Self.isLoopback(host) && credentials == nil {
            FileHandle.standardError.write(Data(
                "atsproxy: warning: listening on \(host) without proxy credentials (--allow-open-proxy)\n".utf8))
        }
        guard let profile = IOSProfile.band(for: iosVersion) else { throw ExitCode.validationFailure }
        let threadCount = threads ?? min(EventLoopGroup.coreCount, Self.maxThreads)
        let (level, levelWarning) = Self.diagnosticsLevel(
            option: diagnostics, environment: ProcessInfo.processInfo.environment["CFNETWORK_DIAGNOSTICS"])
        if let levelWarning {
            FileHandle.standardError.write(Data("atsproxy: warning: \(levelWarning)\n".utf8))
        }
        // Opened before anything is created on disk (the CA), so a bad path fails first and alone.
        let sink: ProxyLogSink
        do { sink = try ProxyLogSink(diagnosticsLevel: level, jsonPath: logJSON, quiet: quiet) } catch {
            throw failure("atsproxy run: error: --log-json: \(error)")
        }

        // Opened with the log, before the CA: a capture path that cannot be used fails first, and nothing is written
        // to a file that is not a capture. The web view reads the capture: without --capture it gets a temporary one.
        var capture: CaptureSink?
        let webAddress = try webOptions.address()
        var temporaryCapture: String?
        let caFile = URL(fileURLWithPath: caDir).appendingPathComponent(CertificateAuthority.certificateFileName).path
        // The HAR is written at exit: a folder that cannot take it is said now, not after the session.
        if let har = captureOptions.har {
            if let problem = HARFile.problem(writing: har) { throw failure("atsproxy run: error: --har: \(problem)") }
            // The HAR replaces its file when complete: never the capture it is read from.
            if let capture = captureOptions.capture,
                URL(fileURLWithPath: har).standardizedFileURL == URL(fileURLWithPath: capture).standardizedFileURL
            {
                throw failure("atsproxy run: error: --har and --capture name the same file (\(har))")
            }
        }
        let store = captureOptions.capture.flatMap(PostgresLocation.init)
        if let store, webAddress != nil || captureOptions.har != nil {
            throw failure(
                "atsproxy run: error: --web and --har read a capture file; with the team store "
                    + "(\(store.redacted)) use `atsproxy view URL` and `atsproxy har URL --run ID` instead")
        }
        do {
            var path = store == nil ? try captureOptions.resolvedPath() : nil
            if path == nil, store == nil, webAddress != nil || captureOptions.har != nil {
                path = Self.temporaryCapturePath()
                temporaryCapture = path
            }
            var settings = [
                "policy": plist ?? "Apple's defaults", "ios": String(iosVersion), "ats": ats.rawValue,
                "block": block.rawValue, "listen": listen, "ca": caFile,
            ]
            // The team store's runs come from many machines: each says which.
            if store != nil { settings["host"] = ProcessInfo.processInfo.hostName }
            if let label = captureOptions.runLabel { settings["label"] = label }
            let run = CaptureRunInfo(
                started: Date().timeIntervalSince1970, atsproxyVersion: ATSProxyCommand.configuration.version,
                bodyLimit: captureOptions.bodyLimit, settings: settings)
            let writer: (any CaptureDestination)?
            if let store {
                writer = try PostgresCaptureWriter.open(store, run: run)
            } else if let path {
                let file = try CaptureWriter.open(path: path, run: run)
                if !file.exclusive {
                    ProxyLogSink.writeToStandardError(
                        "atsproxy: warning: --capture: \(path): its file system has no flock, so another atsproxy "
                            + "writing the same file would not be refused\n")
                }
                writer = file
            } else {
                writer = nil
            }
            if let writer {
                let notices = sink
                let opened = CaptureSink(writer: writer) { text in notices.notice(text) }
                sink.add(opened)
                capture = opened
            }
        } catch {
            throw failure("atsproxy run: error: --capture: \(error)")
        }
        defer { if let temporaryCapture { CaptureWriter.removeFiles(at: temporaryCapture) } }
        // A run that fails before it listens (a port in use, a bad CA, a policy that cannot be read) leaves nothing in
        // the capture: a file it made is removed, an existing one loses the run's row. Runs before the removal above.
        var listening = false
        defer { if !listening { capture?.discard() } }
        let feed = webAddress == nil ? nil : LiveFeed()
        if let feed { sink.add(feed) }

        var atsDictionary: PlistValue? = AppleDefaultPolicy.atsDictionary
        var policySource = AppleDefaultPolicy.source
        if let plist {
            let loaded: LoadedPolicy
            do { loaded = try PolicyLoader.load(path: plist) } catch {
                throw failure("atsproxy run: error: \(error.description)", status: 2)
            }
            atsDictionary = loaded.atsDictionary
            policySource = loaded.sourceDescription
            // The same findings as `atsproxy lint`, one line each: one piece of code decides what is wrong.
            let findings = loaded.lintFindings(profile: profile)
            for finding in findings {
                FileHandle.standardError.write(Data("atsproxy: policy: \(finding.oneLine)\n".utf8))
            }
            if !findings.isEmpty {
                FileHandle.standardError.write(
                    Data("atsproxy: policy: fixes: atsproxy lint \(plist) --ios \(iosVersion)\n".utf8))
            }
        }
        let policy = ATSPolicy(atsDictionary: atsDictionary, options: readings.policyOptions(profile: profile))

        var roots: [Certificate] = []
        for path in trustCA {
            let text: String
            do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
                let reason = FileManager.default.fileExists(atPath: path) ? error.localizedDescription : "no such file"
                throw failure("atsproxy run: error: --trust-ca \(path): cannot read the file (\(reason))", status: 2)
            }
            do { roots += try Certificate.chain(pem: text) } catch {
                throw failure("atsproxy run: error: --trust-ca \(path): no PEM certificate in it (\(error))", status: 2)
            }
        }
        let caURL = URL(fileURLWithPath: caDir)
        // Named after the option, as --log-json's errors are: the CA's files and folder are the user's choice.
        let authority: CertificateAuthority
        let created: Bool
        let keyWarning: String?
        do {
            (authority, created) = try CertificateAuthority.loadOrCreate(in: caURL)
            keyWarning = try CertificateAuthority.keyPermissionWarning(in: caURL)
        } catch {
            throw failure("atsproxy run: error: --ca-dir: \(error)")
        }
        if let keyWarning {
            FileHandle.standardError.write(Data("atsproxy: warning: \(keyWarning)\n".utf8))
        }
        // Mirror mode reproduces an untrusted upstream chain with a leaf from a second CA, kept beside the main one
        // so its leaves stay the same across runs, and never offered for install.
        var neverTrusted: CertificateAuthority?
        if ats == .mirror {
            let folder = caURL.appendingPathComponent(CertificateAuthority.neverTrustedFolderName)
            do {
                do {
                    neverTrusted = try CertificateAuthority.loadOrCreate(
                        in: folder, commonName: "ATSProxy never-trusted CA (mirror mode; do not install)").authority
                } catch .alreadyExists {
                    // Another proxy sharing --ca-dir wrote it between our look and our write: use that one.
                    neverTrusted = try CertificateAuthority.load(from: folder)
                }
            } catch {
                throw failure("atsproxy run: error: --ca-dir: mirror mode's never-trusted CA: \(error)")
            }
        }
        // Says which band a version between bands (--ios 16) was simulated with, as lint and explain do.
        let profileText =
            profile.rawValue == iosVersion ? "\(profile)" : "\(profile) behaviour band (for --ios \(iosVersion))"
        var blocking = ats == .enforce ? " (block \(block.rawValue))" : ""
        if ats == .mirror {
            blocking = plist == nil
                ? " (the device's own ATS decides; nothing is blocked)"
                : " (two verdicts per connection: the policy's and the device's)"
        }
        let onboarding = DeviceOptions.onboardingSite(
            authority: authority, policy: policySource, profile: profileText, ats: ats.rawValue + blocking)
        let environment = ProxyEnvironment(
            policy: policy, mode: ats.mode, blockStyle: block.style,
            mappings: try HostMapping.parsingAll(map),
            passthrough: try HostPattern.parsingAll(passthrough, option: "--passthrough"),
            credentials: credentials,
            minter: LeafMinter(authority: authority, untrustedAuthority: neverTrusted),
            factsCollector: HandshakeFactsCollector(trust: try TrustEvaluator(useSystemRoots: true, userRoots: roots)),
            // A capture keeps the trace records, so sessions make them (level 1 at least); stderr shows them only
            // at the --diagnostics level (StandardErrorSink filters by it).
            diagnosticsLevel: capture == nil ? level : max(level, 1), jsonEvents: logJSON != nil,
            timeouts: .init(
                handshake: .milliseconds(Int(handshakeTimeout * 1000)),
                client: .milliseconds(Int(clientTimeout * 1000)),
                response: .milliseconds(Int(responseTimeout * 1000))),
            upstreamALPN: upstreamALPN,
            upstreamResumption: upstreamResumption, insecureUpstream: insecureUpstream,
            recording: Self.recording(captureBodyLimit: capture == nil ? nil : captureOptions.bodyLimit, level: level),
            onboarding: onboarding, appleHosts: deviceOptions.appleHosts,
            autoPassthrough: pinning.autoPassthroughStore(), mirrorComparesPolicy: ats == .mirror && plist != nil)
        HeapTuning.keepFreedMemoryForReuse()
        let group = try EventLoopGroup(
            configuration: .init(loopCount: threadCount, yieldsBeforeSleeping: yieldsBeforeSleep))
        let server = ProxyServer(environment: environment, group: group, sink: sink)
        let listener: Listener
        do { listener = try server.listen(host: host, port: port, transparent: modes.regular == nil) } catch {
            throw failure("atsproxy run: error: \(Self.listenFailure(error, host: host, port: port))")
        }
        let transparentLine = try TransparentListening.start(modes, server: server, first: listener)

        // Before the banner: whoever reads it may stop the proxy at once, and that signal must find the handler.
        let done = DispatchSemaphore(value: 0)
        let shutdownSeconds =
            shutdownTimeout == shutdownTimeout.rounded() ? String(Int(shutdownTimeout)) : String(shutdownTimeout)
        let signalsSeen = Atomic<Int>(0)
        // SIGINT, SIGTERM and SIGHUP: after a SIGHUP the terminal may be gone, so the messages must not trap.
        let signals = ShutdownSignals { _ in
            // Each signal runs here on its own: a second one comes while the first still waits for the exchanges.
            switch signalsSeen.wrappingAdd(1, ordering: .relaxed).newValue {
            case 1:
                ProxyLogSink.writeToStandardError(
                    "atsproxy: shutting down (in-flight exchanges get \(shutdownSeconds) s; "
                        + "Ctrl-C again to stop them now)\n")
                group.shutdownGracefully(timeout: .milliseconds(Int(shutdownTimeout * 1000)))
                done.signal()
            case 2:
                ProxyLogSink.writeToStandardError(
                    "atsproxy: stopping now: exchanges still in flight are cut off and logged as such\n")
                group.cutShutdownShort()
            default:
                // Something keeps the loops from stopping: leave without waiting (and without flushing).
                ProxyLogSink.writeToStandardError("atsproxy: exiting at once\n")
                _exit(130)
            }
        }

        let networkAddress = DeviceOptions.registerAddresses(site: onboarding, host: host, port: Int(listener.port))
        let shownHost = host.contains(":") ? "[\(host)]" : host
        let proxyURL = "http://\(Self.proxyUserInfo(credentials))\(shownHost):\(listener.port)"
        let bodies = captureOptions.bodyLimit == 0 ? "no bodies" : "bodies up to \(captureOptions.bodyLimit) bytes each"
        var captureLine =
            temporaryCapture != nil ? "" : capture.map { "\nCapture: \($0.path) (\(bodies))" } ?? ""
        if let har = captureOptions.har { captureLine += "\nHAR:     \(har) (written at exit, \(bodies))" }
        var webLine = ""
        var webReaders: [CaptureReader] = []
        if let webAddress, let capture, let feed {
            var context = WebViewContext(
                proxyAddress: networkAddress ?? "\(shownHost):\(listener.port)", proxyURL: proxyURL, caPath: caFile,
                policy: policySource, iosProfile: profileText, atsMode: ats.rawValue,
                blockStyle: ats == .enforce ? block.rawValue : nil, capturePath: capture.path,
                captureIsTemporary: temporaryCapture != nil, live: true,
                version: ATSProxyCommand.configuration.version,
                extensions: WebViewWiring.extensions(
                    policy: ReportPolicy(
                        atsDictionary: atsDictionary, source: policySource,
                        options: readings.policyOptions(profile: profile))))
            if modes.transparent != nil {
                context.extensions.quicAttemptsRefused = { [environment] in environment.quicRefusals.count }
            }
            let web: Listener
            do {
                let reader = try CaptureReader(path: capture.path)
                let streamReader = try CaptureReader(path: capture.path)
                let exportReader = try CaptureReader(path: capture.path)
                webReaders = [reader, streamReader, exportReader]
                let server = WebServer(
                    router: WebRouter(
                        reader: reader, streamReader: streamReader, exportReader: exportReader, context: context),
                    feed: feed, credentials: credentials)
                web = try server.listen(on: group, host: webAddress.0, port: webAddress.1)
            } catch let error as IOError {
                throw failure(
                    "atsproxy run: error: --web: \(Self.listenFailure(error, host: webAddress.0, port: webAddress.1))")
            } catch {
                throw failure("atsproxy run: error: --web: \(error)")
            }
            let webHost = webAddress.0.contains(":") ? "[\(webAddress.0)]" : webAddress.0
            let kept = temporaryCapture != nil ? " (a temporary capture, deleted at exit; --capture FILE keeps it)" : ""
            webLine = "\nWeb:     http://\(webHost):\(web.port)/\(kept)"
        }
        listening = true
        FileHandle.standardOutput.write(Data("""
            ATSProxy listening on \(shownHost):\(listener.port) (\(threadCount) thread\(threadCount == 1 ? "" : "s"))
            Policy:  \(policySource), \(profileText), ATS \(ats.rawValue)\(blocking)
            CA:      \(caFile)\(created ? " (created now: trust it on the device or client)" : "")
            \(modes.regular == nil ? TransparentListening.tryLine(caFile: caFile)
                : "Try:     curl -x \(proxyURL) --cacert \(caFile) https://example.com/")\
            \(captureLine)\(webLine)\(transparentLine)
            \(modes.regular == nil ? TransparentListening.setUpLine
                : DeviceOptions.setUpLines(networkAddress: networkAddress, loopbackPort: Int(listener.port)))
            """.utf8))

        if insecureUpstream {
            ProxyLogSink.writeToStandardError(
                "atsproxy: warning: --insecure-upstream: upstream certificates are not verified; a forged server "
                    + "reaches clients re-signed by the proxy's CA, which they trust\n")
        }
        done.wait()
        signals.cancel()
        sink.flushAll()
        if ats == .mirror, let summary = environment.mirrorTally.summary(compared: environment.mirrorComparesPolicy) {
            ProxyLogSink.writeToStandardError(summary)
        }
        // Before the capture's own close: folding its write-ahead log back into the file needs the only connection.
        for reader in webReaders {
            do { try reader.close() } catch { ProxyLogSink.writeToStandardError("atsproxy: --web: \(error)\n") }
        }
        capture?.close()
        if let har = captureOptions.har, let capture {
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
