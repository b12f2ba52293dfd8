import ATSPolicy
import Foundation
import ProxyEventLoop
import TLSCore

/// Settings of one diagnosis.
public struct DiagnoseOptions: Sendable {
    /// The `https://` URL to diagnose.
    public var url: String
    public var profile: IOSProfile
    /// How the policy engine reads unconfirmed points (its `profile` is `profile`).
    public var policyOptions: PolicyOptions
    /// Roots the simulated device trusts besides the system store (`--trust-ca`).
    public var userRoots: [Certificate]
    /// The app's own policy (`--plist`) and a description of where it came from.
    public var appPolicy: (policy: ATSPolicy, source: String)?
    /// Connect here instead of the URL's host and port (`--connect-to`); SNI and ATS still use the URL's host.
    public var connectAddress: ConnectAddress?
    /// Seconds one connection attempt (TCP connect and TLS handshake together) may take.
    public var timeout: Double
    /// ALPN the simulated URLSession offers.
    public var alpn: [String]

    public init(
        url: String, profile: IOSProfile = .newest, policyOptions: PolicyOptions? = nil, userRoots: [Certificate] = [],
        appPolicy: (policy: ATSPolicy, source: String)? = nil, connectAddress: ConnectAddress? = nil,
        timeout: Double = 10,
        alpn: [String] = ["h2", "http/1.1"]
    ) {
        self.url = url
        self.profile = profile
        var readings = policyOptions ?? PolicyOptions(profile: profile)
        readings.profile = profile
        self.policyOptions = readings
        self.userRoots = userRoots
        self.appPolicy = appPolicy
        self.connectAddress = connectAddress
        self.timeout = timeout
        self.alpn = alpn
    }
}

/// Why a diagnosis could not run at all.
public enum DiagnoseError: Error, Sendable, CustomStringConvertible {
    case invalidURL(String)
    case notHTTPS(String)
    /// A `--connect-to` value that is not `ADDR` or `ADDR:PORT`; the message says why.
    case invalidConnectAddress(String)
    case cannotConnect(String)
    /// The server accepted TCP connections but answered none of the probes' ClientHellos within the timeout.
    case timedOut(address: String, seconds: Double)
    /// The server accepted TCP connections but gave none of the probes' ClientHellos a TLS answer: it answered
    /// with bytes that are not TLS (`sentNonTLSBytes`), or closed `closedProbes` connections before answering and
    /// let `timedOutProbes` run out of `seconds`.
    case noTLSAnswer(address: String, sentNonTLSBytes: Bool, closedProbes: Int, timedOutProbes: Int, seconds: Double)
    case tls(String)

    public var description: String {
        switch self {
        case .invalidURL(let m): "invalid URL: \(m)"
        case .notHTTPS(let u): "\(u): diagnose needs an https:// URL (ATS diagnostics test TLS connections)"
        case .invalidConnectAddress(let m): m
        case .cannotConnect(let m): "cannot connect to \(m)"
        case .timedOut(let address, let seconds):
            "\(address) accepted the TCP connection but answered no TLS ClientHello within "
                + "\(seconds.formatted(.number)) s; a URLSession load would fail with NSURLErrorTimedOut (-1001)"
        case .noTLSAnswer(let address, true, _, _, _):
            "the server at \(address) answered the TLS ClientHello with bytes that are not TLS (plain HTTP, for "
                + "example): it does not speak TLS there; a URLSession load would fail with "
                + "NSURLErrorSecureConnectionFailed (-1200)"
        case .noTLSAnswer(let address, false, _, 0, _):
            "the server at \(address) closed every connection during the TLS handshake without a TLS answer: it "
                + "does not seem to speak TLS there; a URLSession load would fail with "
                + "NSURLErrorSecureConnectionFailed (-1200)"
        case .noTLSAnswer(let address, false, let closed, let timedOut, let seconds):
            "the server at \(address) gave no ClientHello a TLS answer (it closed \(closed) connections during the "
                + "handshake and left \(timedOut) unanswered for \(seconds.formatted(.number)) s): it does not seem to "
                + "speak TLS there"
        case .tls(let m): m
        }
    }
}

/// Runs nscurl's `--ats-diagnostics` matrix against a server with the simulated iOS TLS stack.
///
/// Each row builds the ATS policy of that row, asks the policy engine for the connection requirements, makes one
/// handshake offering exactly what iOS would (`UpstreamTLS.iOSLikeConfiguration`), and judges the facts with
/// the engine. Rows whose ClientHello would be identical share one handshake.
public final class Diagnoser {
    private let options: DiagnoseOptions
    /// The URL's host with the port actually connected to (`--connect-to ADDR:PORT` replaces the URL's).
    private let target: ConnectionTarget
    /// The port the URL names.
    private let urlPort: Int
    private let collector: HandshakeFactsCollector
    private var handshakeCache: [String: HandshakeFacts] = [:]
    /// The chain a probe received, judged when an iOS-like handshake fails before the server's certificate.
    private var probeChain: [Certificate] = []
    private let progress: (String) -> Void

    /// - Parameter progress: called with a short line before each network step (for a TTY progress display).
    public init(options: DiagnoseOptions, progress: @escaping (String) -> Void = { _ in }) throws(DiagnoseError) {
        self.options = options
        var parsed: ConnectionTarget
        do {
            parsed = try ConnectionTarget(parsing: options.url)
        } catch {
            throw .invalidURL(error.description)
        }
        guard parsed.scheme == "https" || parsed.scheme == "wss" else { throw .notHTTPS(options.url) }
        urlPort = parsed.port
        if let port = options.connectAddress?.port { parsed.port = port }
        target = parsed
        do {
            collector = HandshakeFactsCollector(
                trust: try TrustEvaluator(useSystemRoots: true, userRoots: options.userRoots))
        } catch {
            throw .tls("cannot load the trust store: \(error)")
        }
        self.progress = progress
    }

    /// Probes the server, runs every row and builds the report.
    public func run() throws(DiagnoseError) -> DiagnoseReport {
        // The first connection doubles as a reachability check: a refused TCP connect stops the diagnosis.
        progress("connecting to \(connectDescription)")
        do {
            _ = try BlockingTCPClient(host: connectHost, port: target.port, timeout: options.timeout)
        } catch {
            throw .cannotConnect("\(connectDescription): \(error)")
        }
        let capabilities = try probeCapabilities()
        var notes: [String] = []
        let matrix = DiagnoseCase.matrix(host: target.host)
        let total = matrix.joined().count
        var done = 0
        var sections: [[DiagnoseCaseResult]] = []
        for section in matrix {
            var results: [DiagnoseCaseResult] = []
            for row in section {
                done += 1
                progress("\(row.name) (\(done)/\(total))")
                let policy = ATSPolicy(
                    atsDictionary: row.atsDictionary, options: options.policyOptions)
                results.append(evaluate(policy: policy, row: row, capabilities: capabilities))
            }
            sections.append(results)
        }
        var appResult: AppPolicyResult?
        if let app = options.appPolicy {
            progress("the app's own policy")
            let r = evaluate(
                policy: app.policy,
                row: DiagnoseCase(
                    section: "", name: "App policy", atsDictionary: .dictionary(PlistDictionary()), exceptionKeys: []),
                capabilities: capabilities)
            let decided = app.policy.requirements(for: target).decision
            appResult = AppPolicyResult(
                source: app.source, allowed: r.passed,
                decidedBy: decided.map { d in
                    d.keyPath.isEmpty ? d.reason : "\(d.keyPathString): \(d.reason)"
                } ?? "ATS defaults",
                error: r.error, violations: r.violations)
        }
        if urlPort != 443 {
            notes.append(
                "nscurl always tests the URL as given; this run used port \(urlPort) for every row as well")
        }
        if options.connectAddress != nil {
            notes.append(
                "Connected to \(connectDescription) (--connect-to); SNI, certificate checks and ATS used "
                    + "\(target.host)")
        }
        notes.append(
            "Each row is one TLS handshake offering what iOS \(options.profile.rawValue) offers for that ATS "
                + "dictionary; the verdict comes from the ATS policy engine, not from a real device")
        let flat = sections.flatMap { $0 }
        let defaultRequirements = ATSPolicy(atsDictionary: nil, options: options.policyOptions)
            .requirements(for: target).requirements
        return DiagnoseReport(
            url: options.url, host: target.host, port: urlPort, profile: options.profile, sections: sections,
            capabilities: capabilities, defaultOffer: defaultRequirements.map(Diagnoser.offer),
            atsApplies: defaultRequirements?.atsEnforced, atsDecision: defaultRequirements?.decidedBy.reason,
            recommendation: Diagnoser.recommend(flat, appPolicy: options.appPolicy?.policy), appPolicy: appResult,
            notes: notes)
    }

    private var connectHost: String { options.connectAddress?.host ?? target.host }

    /// `host:port`, with an IPv6 literal in brackets.
    private var connectDescription: String {
        connectHost.contains(":") ? "[\(connectHost)]:\(target.port)" : "\(connectHost):\(target.port)"
    }

    // MARK: Rows

    private func evaluate(policy: ATSPolicy, row: DiagnoseCase, capabilities: ServerCapabilities?)
        -> DiagnoseCaseResult
    {
        switch policy.requirements(for: target) {
        case .blocked(let violation):
            let facts = collector.facts(failure: .closedDuringHandshake, capabilities: capabilities)
            return DiagnoseCaseResult(
                testCase: row, passed: false,
                error: NSErrorDescription(violation: violation, failingURL: failingURL).description,
                violations: [violation], facts: facts)
        case .proceed(let requirements):
            var facts = handshake(UpstreamTLS.iOSLikeConfiguration(for: requirements, alpn: options.alpn))
            facts.serverCapabilities = capabilities
            let verdict = policy.evaluate(facts, against: requirements)
            return DiagnoseCaseResult(
                testCase: row, passed: verdict.isAllowed,
                error: verdict.primaryViolation.map {
                    NSErrorDescription(violation: $0, failingURL: failingURL).description
                },
                violations: verdict.violations, facts: facts)
        }
    }

    private var failingURL: String { options.url }

    /// One handshake with `configuration`, cached by what the ClientHello would contain.
    private func handshake(_ configuration: TLSConfiguration) -> HandshakeFacts {
        let key = [
            configuration.minimumVersion?.plistName ?? "-", configuration.maximumVersion?.plistName ?? "-",
            configuration.cipherList ?? "default", configuration.tls13CipherSuites ?? "default",
        ].joined(separator: "|")
        if let cached = handshakeCache[key] { return cached }
        let facts: HandshakeFacts
        switch runHandshake(configuration) {
        case .ran(let engine, let failure):
            facts = collector.facts(from: engine, host: target.host, failure: failure, fallbackChain: probeChain)
        case .noConnection(let failure):
            facts = collector.facts(failure: failure)
        case .timedOut:
            facts = collector.facts(failure: .timedOut)
        }
        handshakeCache[key] = facts
        return facts
    }

    private enum HandshakeRun {
        case ran(TLSEngine, TLSError?)
        /// No TLS result exists (TCP connect or TLS setup failed).
        case noConnection(HandshakeFailure)
        /// Connect and handshake together took longer than `options.timeout`.
        case timedOut
    }

    /// Connects and runs one handshake; `options.timeout` bounds the whole attempt, not each read, so a server
    /// that trickles bytes cannot stretch it.
    private func runHandshake(_ configuration: TLSConfiguration) -> HandshakeRun {
        let sni = IPAddressText.isIPLiteral(target.host) ? nil : target.host
        let engine: TLSEngine
        do {
            engine = try TLSEngine(context: TLSContext(configuration), serverName: sni)
        } catch {
            return .noConnection(.localError("cannot configure TLS: \(error)"))
        }
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int(options.timeout * 1000))
        /// Seconds left of this attempt; throws `ETIMEDOUT` once they are spent.
        func remaining() throws(IOError) -> Double {
            let (seconds, attoseconds) = (deadline - clock.now).components
            let left = Double(seconds) + Double(attoseconds) / 1e18
            guard left > 0 else { throw IOError(errnoCode: ETIMEDOUT, call: "handshake") }
            return left
        }
        let client: BlockingTCPClient
        do {
            client = try BlockingTCPClient(host: connectHost, port: target.port, timeout: options.timeout)
        } catch {
            if case .timedOut = error { return .timedOut }
            return .noConnection(.closedDuringHandshake)
        }
        defer { client.close() }
        let step: TLSEngine.HandshakeStep
        do {
            step = try engine.runHandshake(
                send: { bytes in try client.send(bytes, timeout: try remaining()) },
                receive: { try client.receive(timeout: try remaining()) })
        } catch let error as IOError where error.errnoCode == ETIMEDOUT {
            return .timedOut
        } catch {
            // A reset or a broken socket mid-handshake reaches the app's stack as the peer closing: judged as such.
            return .ran(engine, .closedByPeer)
        }
        switch step {
        case .complete: return .ran(engine, nil)
        case .failed(let error): return .ran(engine, error)
        case .needsMoreInput: return .ran(engine, .closedByPeer)
        }
    }

    // MARK: Probes

    /// How a probe got no TLS answer at all.
    private enum NoTLSAnswer {
        case timedOut
        /// The server closed (or reset) the connection before sending a byte.
        case closed
        /// The server's first bytes were not a TLS record.
        case notTLS
    }

    private func probeCapabilities() throws(DiagnoseError) -> ServerCapabilities {
        var outcomes: [TLSVersion: ProbeOutcome] = [:]
        var unanswered: [NoTLSAnswer] = []
        for (version, configuration) in ServerProbe.versionProbes {
            progress("probing \(version.plistName) support")
            let (outcome, noAnswer) = probe(configuration)
            outcomes[version] = outcome
            if let noAnswer { unanswered.append(noAnswer) }
        }
        // A server that gives no ClientHello a TLS answer cannot be diagnosed: every row would fail the same way.
        if unanswered.count == ServerProbe.versionProbes.count {
            let timeouts = unanswered.filter { $0 == .timedOut }.count
            if timeouts == unanswered.count {
                throw .timedOut(address: connectDescription, seconds: options.timeout)
            }
            throw .noTLSAnswer(
                address: connectDescription, sentNonTLSBytes: unanswered.contains(.notTLS),
                closedProbes: unanswered.filter { $0 == .closed }.count, timedOutProbes: timeouts,
                seconds: options.timeout)
        }
        var fs: ProbeOutcome?
        if ServerProbe.needsForwardSecrecyProbe(outcomes) {
            progress("probing forward secrecy")
            fs = probe(ServerProbe.forwardSecrecyProbe).outcome
        }
        return ServerProbe.capabilities(versionOutcomes: outcomes, forwardSecrecyOutcome: fs)
    }

    /// One permissive handshake, and how it got no TLS answer when it got none.
    private func probe(_ configuration: TLSConfiguration) -> (outcome: ProbeOutcome, noAnswer: NoTLSAnswer?) {
        switch runHandshake(configuration) {
        case .ran(let engine, let failure):
            let chain = engine.peerCertificateChain
            if probeChain.isEmpty { probeChain = chain }
            let outcome = ProbeOutcome(
                negotiated: failure == nil ? engine.negotiated : nil, failure: failure, chain: chain)
            switch failure {
            case .notTLS: return (outcome, .notTLS)
            case .closedByPeer where !engine.hasReceivedInput: return (outcome, .closed)
            default: return (outcome, nil)
            }
        case .noConnection:
            return (ProbeOutcome(negotiated: nil, failure: .closedByPeer), nil)
        case .timedOut:
            return (ProbeOutcome(negotiated: nil, failure: .closedByPeer), .timedOut)
        }
    }

    // MARK: Advice

    /// "offers TLSv1.2, TLSv1.3 with 13 suites, all forward secret; requires TLSv1.2+, forward secrecy, …".
    static func offer(_ r: ConnectionRequirements) -> String {
        var parts = ["offers " + r.offeredVersions.map(\.plistName).joined(separator: ", ")]
        if let suites = r.offeredCipherSuites {
            let fs = suites.allSatisfy(\.isForwardSecret) ? ", all forward secret" : ""
            parts[0] += " with \(suites.count) cipher suites\(fs)"
        } else {
            parts[0] += " with the stack's default cipher suites"
        }
        var needs = ["\(r.minimumTLSVersion.plistName) or later"]
        if r.requiresForwardSecrecy { needs.append("forward secrecy") }
        let rules = r.certificateRules
        needs.append("RSA ≥ \(rules.minimumRSABits) / EC ≥ \(rules.minimumECBits) bits")
        if rules.requiresSHA2 { needs.append("SHA-2 signatures") }
        needs.append("a trusted chain whose SAN names the host")
        return parts[0] + "; requires " + needs.joined(separator: ", ")
    }

    /// The narrowest passing row, or why nothing helps.
    /// With the app's policy, the snippet fits into it (no duplicate NSExceptionDomains or domain entry).
    static func recommend(_ results: [DiagnoseCaseResult], appPolicy: ATSPolicy? = nil) -> Recommendation {
        guard let first = results.first else { return .noExceptionCanHelp(reason: "no test ran") }
        if first.passed { return .noExceptionNeeded }
        let passing = results.filter { $0.passed && !$0.testCase.exceptionKeys.isEmpty && $0.testCase.relaxation > 0 }
        if let best = passing.min(by: { $0.testCase.relaxation < $1.testCase.relaxation }) {
            let host = best.testCase.dictionary["NSExceptionDomains"]?.dictionaryValue?.keys.first ?? ""
            let fix = ExceptionFix.setKeys(domain: host, keys: best.testCase.exceptionKeys)
            let placed = fix.placedSnippet(in: appPolicy)
            return .exception(
                testName: best.testCase.name, fix: fix, plistSnippet: placed?.snippet ?? "",
                pasteInside: placed?.pasteInside ?? "NSAppTransportSecurity")
        }
        if results.contains(where: { $0.passed && $0.testCase.name == "Allow All Loads" }) {
            return .onlyArbitraryLoads
        }
        for v in first.violations {
            if case .noExceptionCanHelp(let reason) = v.fix { return .noExceptionCanHelp(reason: reason) }
        }
        return .noExceptionCanHelp(
            reason: first.violations.first?.explanation ?? "the server failed every configuration nscurl tries")
    }
}

@available(*, unavailable, message: "A Diagnoser runs on one thread.")
extension Diagnoser: Sendable {}

/// IP-literal detection for SNI (iOS sends no SNI for IP hosts).
enum IPAddressText {
    static func isIPLiteral(_ host: String) -> Bool {
        host.contains(":") || (host.split(separator: ".").count == 4 && host.allSatisfy { $0.isNumber || $0 == "." })
    }
}
