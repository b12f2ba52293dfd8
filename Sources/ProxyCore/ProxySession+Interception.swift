import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import TLSCore

// Interception of a CONNECT tunnel that carries TLS:
//
// 1. The client's ClientHello has been parsed (SNI, ALPN) but not answered. The policy gives the requirements for
//    https://host:port; the upstream is connected and a TLS handshake runs offering exactly what iOS would
//    (UpstreamTLS.iOSLikeConfiguration).
// 2. If that handshake fails, a second, permissive connection learns what the server does support, so the
//    verdict can say why (and, in annotate mode, still carries the traffic).
// 3. The facts are judged (ATSPolicy.evaluate). Allowed, or `--ats annotate`: the client's handshake completes
//    with a leaf minted for the host and HTTP/1.1 is relayed. `--ats enforce --block tls`: the client's own handshake
//    fails the way the app's would: a fatal alert for version and cipher violations, a leaf with the same flaw for
//    certificate violations. `--block http`: the handshake completes and every request is answered 502.

/// The TLS half of a session that intercepts.
final class Interception {
    enum Attempt { case iOSLike, permissive }
    enum Stage { case connectingUpstream, upstreamHandshake, clientHandshake, relaying, failed }

    let host: String
    let port: Int
    let hello: ClientHello
    var pendingClientBytes: [UInt8]
    let requirements: ConnectionRequirements?
    let decision: PolicyDecision
    var attempt: Attempt
    var stage: Stage = .connectingUpstream
    var upstream: TLSEngine?
    var client: TLSEngine?
    /// The failure of the iOS-like attempt, kept while the permissive probe runs.
    var iOSLikeFailure: TLSError?
    var violations: [ATSViolation] = []
    /// Set in `--block http` mode, and after a block-by-certificate when the client accepted the flawed leaf anyway.
    var blockAnswer: ATSAnswer?
    /// The flaw of the leaf `--block tls` served to reproduce a certificate violation.
    var flawedLeaf: String?
    /// Set when the client accepted that leaf anyway: why its requests get the block answer instead (console note).
    var blockFallback: String?
    /// The flawed-leaf refusal waits to be logged until the client has refused the leaf (its handshake fails, or
    /// it closes without a request): a client that accepts it gets the fallback note on its requests instead.
    var refusalToLog = false
    var annotation: [(String, String)] = []
    var outcome: ExchangeSummary.ATSOutcome = .notEvaluated
    var raw = false
    var upstreamFinished = false
    /// What the upstream chose by ALPN; the client is answered with the same when it offered it (ALPN mirroring).
    var upstreamALPN: String?
    /// The upstream refused the mirrored offer with no_application_protocol; the retry offers both protocols.
    var widenedALPN = false
    /// The upstream's TLS client context and SNI, kept for the extra connections of an HTTP/1.1 upstream pool.
    var upstreamContext: TLSContext?
    var upstreamSNI: String?
    /// The client sent plaintext (a request) since its handshake.
    var clientSpoke = false
    /// What the client sent before the upstream said anything (at most `replayLimit` bytes; nil once the upstream
    /// answered or the client sent more): a retried upstream gets it again.
    var unansweredClientPlaintext: [UInt8]? = []
    static let replayLimit = 64 << 10
    /// What the upstream was last offered by ALPN.
    var upstreamOffer: [String] = []
    /// Where the client side was when a retry of the upstream put it on hold (see
    /// `retryOfferingH2IfClosedBeforeRequest`).
    var resumeStage: Stage?
    /// Extra upstream connections (lanes) of an H2ToH1Relay, each with its own TLS client.
    var lanes: [UpstreamLane: LaneTLS] = [:]
    /// Upstream TCP connections made for this CONNECT so far: the first, then a probe or a retry (traced as
    /// attempts of their own).
    var connectAttempts = 0

    /// When the client's CONNECT was read (the session's clock): a connection-level block's duration runs from it.
    let started: Double

    init(host: String, port: Int, hello: ClientHello, helloBytes: [UInt8], requirements: ConnectionRequirements?,
         decision: PolicyDecision, started: Double) {
        self.started = started
        self.host = host
        self.port = port
        self.hello = hello
        self.pendingClientBytes = helloBytes
        self.requirements = requirements
        self.decision = decision
        self.attempt = requirements == nil ? .permissive : .iOSLike
    }

    /// `https://host[:port]`, made once: every request's URL starts with it.
    private(set) lazy var url: String = Self.httpsURL(host: host, port: port)

    /// `https://host[:port]` for a CONNECT target.
    static func httpsURL(host: String, port: Int) -> String {
        port == 443 ? "https://\(bracketed(host))" : "https://\(authority(host: host, port: port))"
    }

    /// `host:port`, as a CONNECT names its target.
    static func authority(host: String, port: Int) -> String { "\(bracketed(host)):\(port)" }

    /// An IPv6 literal needs brackets next to a port (RFC 3986 §3.2.2), or the port merges into the address.
    private static func bracketed(_ host: String) -> String {
        host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
    }
}

extension ProxySession {
    func startInterception(connectHost: String, port: Int, hello: ClientHello, helloBytes: [UInt8]) {
        // The name the app asked for is the SNI; IP hosts send none, so the CONNECT host stands in. An SNI that is
        // no DNS name (some clients send `host:port`) is not trusted either.
        let sni = hello.serverName.map { $0.lowercased() }
        let host = sni.flatMap { Self.isPlausibleDNSName($0) ? $0 : nil } ?? connectHost.lowercased()
        if let sni, sni != host {
            notice("\(connectHost):\(port): the client sent the SNI '\(sni)', which is no host name; using \(host)")
        }
        var requirements: ConnectionRequirements?
        var decision = PolicyDecision(keyPath: [], reason: "ATS evaluation is off (--ats off)")
        if env.mode != .off {
            switch env.requirements(for: ConnectionTarget(scheme: "https", host: host, port: port)) {
            case .proceed(let r):
                requirements = r
                decision = r.decidedBy
            case .blocked(let v):
                // https is never refused before connecting; keep the engine's word if it ever is.
                decision = v.decidedBy ?? PolicyDecision(keyPath: [], reason: v.explanation)
            }
        }
        let i = Interception(
            host: host, port: port, hello: hello, helloBytes: helloBytes, requirements: requirements,
            decision: decision, started: now())
        interception = i
        phase = .intercepting
        connectInterceptionUpstream(i, reason: nil)
    }

    /// Letters, digits, hyphens, underscores and dots: what a TLS server_name may hold (RFC 6066 §3).
    static func isPlausibleDNSName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 253
            && name.utf8.allSatisfy { c in
                (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2E || c == 0x5F
            }
    }

    /// Opens an upstream connection for `i`. `reason`: why a connection after the first is made (nil for the first).
    private func connectInterceptionUpstream(_ i: Interception, reason: String?) {
        let (address, upstreamPort) = env.upstreamAddress(host: i.host, port: i.port)
        i.stage = .connectingUpstream
        i.connectAttempts += 1
        trace(.tcpConnectionStart(
            connectionID: id, host: i.host, port: i.port, attempt: i.connectAttempts, reason: reason,
            mappedTo: mappedAddress(host: i.host, port: i.port)))
        commands.append(.connectUpstream(address: address, port: upstreamPort))
    }

    func interceptUpstreamConnected() {
        guard let i = interception else { return }
        trace(.tcpConnectionConnected(connectionID: id, attempt: i.connectAttempts))
        if env.upstreamALPN == .mirror, !i.widenedALPN, env.h2OnlyOrigins.contains(host: i.host, port: i.port) {
            i.widenedALPN = true
        }
        let offer = env.upstreamALPN.upstreamOffer(clientOffer: i.hello.alpnProtocols, widened: i.widenedALPN)
        i.upstreamOffer = offer
        var configuration: TLSConfiguration
        switch i.attempt {
        case .iOSLike:
            guard let req = i.requirements else { return }
            configuration = UpstreamTLS.iOSLikeConfiguration(for: req, alpn: offer)
        case .permissive:
            configuration = UpstreamTLS.permissiveProbeConfiguration()
            configuration.alpnProtocols = offer
        }
        configuration.sessionResumption = env.upstreamSessions != nil
        let key = TLSContextKey.upstream(
            minimum: configuration.minimumVersion, maximum: configuration.maximumVersion,
            cipherList: configuration.cipherList, tls13Suites: configuration.tls13CipherSuites, alpn: offer)
        do {
            let context = try env.contexts.context(key: key) { () throws(OpenSSLError) in try TLSContext(configuration) }
            // iOS sends no SNI for IP literals.
            let sni = IPAddress(i.host) == nil ? i.host : nil
            let engine = try TLSEngine(context: context, serverName: sni)
            if let sessions = env.upstreamSessions {
                // iOS resumes a session to an origin it talked to recently; the key holds all that shapes the
                // ClientHello and the identity checked, so a session is offered only where the app's would be.
                let (address, port) = env.upstreamAddress(host: i.host, port: i.port)
                engine.offerSession(from: sessions, key: TLSSessionKey(
                    context: context, host: i.host, serverName: sni, address: address, port: port, alpn: offer))
            }
            i.upstream = engine
            i.upstreamContext = context
            i.upstreamSNI = sni
            i.stage = .upstreamHandshake
            commands.append(.startTimer(.upstreamHandshake, after: env.timeouts.handshake))
            stepUpstreamHandshake(i)
        } catch {
            notice("\(i.host):\(i.port): cannot set up the upstream TLS client: \(error)")
            closeAll()
        }
    }

    func interceptUpstreamFailed(_ error: String, _ failure: ConnectFailure) {
        guard let i = interception else { return }
        trace(.tcpConnectionConnected(connectionID: id, error: error, attempt: i.connectAttempts))
        let mapped = mappingNote(host: i.host, port: i.port)
        notice("\(i.host):\(i.port)\(mapped): cannot connect upstream: \(error)")
        i.violations = [ATSViolation(
            kind: .unreachable, urlError: failure.urlError, sslError: nil,
            explanation: "could not connect to \(i.host):\(i.port)\(mapped): \(error)",
            fix: .noExceptionCanHelp(reason: "the server is unreachable; this is not an ATS failure"))]
        i.outcome = .failed
        blockClient(i, style: .http)
    }

    /// The upstream accepted the connection but its TLS handshake did not finish in time: the app would time out
    /// too (-1001). A stale deadline (the handshake ended, or the session moved on) does nothing.
    func upstreamHandshakeDeadlinePassed() {
        guard let i = interception, i.stage == .upstreamHandshake else { return }
        let limit = "\(env.timeouts.handshake)"  // "15.0 seconds"
        notice("\(i.host):\(i.port): no TLS handshake from the server within \(limit)")
        commands.append(.closeUpstream)
        upstreamOpen = false
        i.upstream = nil
        i.violations = [ATSViolation(
            kind: .timedOut, urlError: .timedOut, sslError: nil,
            explanation: "the server accepted the connection but sent no TLS handshake within \(limit)",
            fix: .noExceptionCanHelp(reason: "the server does not answer; this is not an ATS failure"))]
        i.outcome = .failed
        blockClient(i, style: .http)
    }

    func interceptUpstreamBytes(_ bytes: [UInt8]) {
        guard let i = interception, let engine = i.upstream else { return }
        switch i.stage {
        case .upstreamHandshake:
            engine.feed(bytes)
            stepUpstreamHandshake(i)
        case .relaying:
            bytes.withUnsafeBytes { readUpstream(i, incoming: $0) }
        default:
            engine.feed(bytes)
        }
    }

    func interceptUpstreamEOF() {
        guard let i = interception else { return }
        if retryOfferingH2IfClosedBeforeRequest(i) { return }
        i.upstream?.feedEndOfInput()
        switch i.stage {
        case .upstreamHandshake:
            stepUpstreamHandshake(i)
        case .relaying:
            readUpstream(i)
            upstreamGone(i)
        default:
            break
        }
    }

    func interceptUpstreamClosed(_ error: String?) {
        guard let i = interception else { return }
        if retryOfferingH2IfClosedBeforeRequest(i) { return }
        switch i.stage {
        case .upstreamHandshake:
            i.upstream?.feedEndOfInput()
            stepUpstreamHandshake(i)
        case .relaying:
            upstreamGone(i)
        default:
            break
        }
    }

    /// An upstream that closes right after the handshake, before any request, having chosen no ALPN protocol from
    /// an offer without h2, is most likely an h2-only server that refuses such clients (nghttpd does). With
    /// `--upstream-alpn mirror` it is reconnected once offering both protocols, while the client's side waits (its
    /// bytes are held); the relay then translates. Returns whether the retry started.
    private func retryOfferingH2IfClosedBeforeRequest(_ i: Interception) -> Bool {
        // The upstream never sent application data (`unansweredClientPlaintext` is nil once it has).
        guard i.stage == .clientHandshake || i.stage == .relaying, !i.upstreamFinished, i.upstreamALPN == nil,
            !i.upstreamOffer.contains("h2"), let unanswered = i.unansweredClientPlaintext,
            !i.clientSpoke || Self.isReplayable(unanswered)
        else { return false }
        let offered = i.hello.alpnProtocols.isEmpty ? "no ALPN" : i.hello.alpnProtocols.joined(separator: ",")
        guard env.upstreamALPN == .mirror, !i.widenedALPN else {
            notice("\(i.host):\(i.port): the upstream closed the connection right after the TLS handshake, before any "
                + "request; it may speak only HTTP/2 and refuse clients that do not offer h2 (the client offered "
                + "\(offered)). Run with --upstream-alpn ios so the proxy offers h2 and translates")
            return false
        }
        if env.h2OnlyOrigins.insert(host: i.host, port: i.port) {
            notice("\(i.host):\(i.port): the upstream closed the connection before any request without choosing a "
                + "protocol (the client offered \(offered)); it is taken for h2-only: connections to it now offer h2 "
                + "and http/1.1, and the proxy translates")
        }
        i.widenedALPN = true
        i.resumeStage = i.stage
        // The old relay's exchange never reached the origin; the retried connection gets the request again.
        relay = nil
        commands.append(.closeUpstream)
        upstreamOpen = false
        i.upstream = nil
        connectInterceptionUpstream(i, reason: "the upstream closed the previous connection before any request, "
            + "choosing no protocol from the offer \(Self.offerText(i.upstreamOffer)); offering h2 and http/1.1, as "
            + "the app does")
        return true
    }

    /// An ALPN offer as traces show it: `http/1.1`, `h2, http/1.1`, or `(none)`.
    static func offerText(_ offer: [String]) -> String {
        offer.isEmpty ? "(none)" : offer.joined(separator: ", ")
    }

    /// Requests that may be sent again after a connection closed before any response (RFC 9110 §9.2.2): safe
    /// methods, complete in what was kept.
    static func isReplayable(_ plaintext: [UInt8]) -> Bool {
        guard !plaintext.isEmpty else { return false }
        return ["GET ", "HEAD ", "OPTIONS "].contains { plaintext.starts(with: $0.utf8) }
    }

    private func upstreamGone(_ i: Interception) {
        guard !i.upstreamFinished, i.blockAnswer == nil else { return }
        i.upstreamFinished = true
        if i.raw {
            upgradeEnded(by: "the upstream closed it")
            shutdownClientTLS(i)
            return
        }
        guard let relay else { return }
        apply(relay.upstreamEOF(), tls: true)
        // The upstream TLS session is over; the client reconnects for its next request. A pool of lanes only lost
        // one of its connections and opens another when needed.
        if relay.isIdle, !(relay is LaneRelay), !isDone { closeAll(tlsClose: true) }
    }

    // MARK: - Upstream handshake and verdict

    private func stepUpstreamHandshake(_ i: Interception) {
        guard let engine = i.upstream else { return }
        let step = engine.handshake()
        let out = engine.takeOutput()
        if !out.isEmpty { commands.append(.sendToUpstream(out)) }
        switch step {
        case .needsMoreInput:
            return
        case .complete:
            upstreamHandshakeCompleted(i, engine)
        case .failed(let error):
            upstreamHandshakeFailed(i, error)
        }
    }

    private func upstreamHandshakeFailed(_ i: Interception, _ error: TLSError) {
        commands.append(.closeUpstream)
        upstreamOpen = false
        i.upstream = nil
        if case .peerAlert(.noApplicationProtocol) = error, !i.widenedALPN, env.upstreamALPN == .mirror {
            // The origin speaks none of the client's protocols (an h2-only origin and an HTTP/1.1 client): offer
            // both and translate, as the app, which always offers both, would have reached it.
            i.widenedALPN = true
            notice("\(i.host):\(i.port): the upstream refused the client's ALPN offer \(i.hello.alpnProtocols); "
                + "retrying with h2 and http/1.1 (the proxy translates)")
            connectInterceptionUpstream(i, reason: "the upstream refused the offer \(Self.offerText(i.upstreamOffer)) "
                + "with no_application_protocol; offering h2 and http/1.1, as the app does")
            return
        }
        if i.attempt == .iOSLike {
            // Learn what the server does support, so the verdict can explain the failure.
            i.iOSLikeFailure = error
            i.attempt = .permissive
            connectInterceptionUpstream(i, reason: "ATSProxy's probe, not the app's: attempt \(i.connectAttempts)'s "
                + "handshake failed (\(error)); every TLS version and cipher suite is offered to learn why")
            return
        }
        let firstError = i.iOSLikeFailure ?? error
        let facts = env.factsCollector.facts(failure: HandshakeFactsCollector.handshakeFailure(firstError))
        traceHandshake(i, facts)
        if let req = i.requirements {
            i.violations = violationsOrFailure(env.policy.evaluate(facts, against: req).violations, facts, i)
        } else {
            i.violations = violationsOrFailure([], facts, i)
        }
        notice("\(i.host):\(i.port): the upstream TLS handshake failed even with every version and suite offered "
            + "(\(error)); answering the client with the error")
        i.outcome = .blocked
        // Annotate relays what it can; with no handshake there is nothing to relay, and the answer explains why.
        blockClient(i, style: env.mode == .annotate ? .http : env.blockStyle)
    }

    private func violationsOrFailure(_ found: [ATSViolation], _ facts: HandshakeFacts, _ i: Interception) -> [ATSViolation] {
        if !found.isEmpty { return found }
        return [ATSViolation(
            kind: .noSharedCipherOrVersion, urlError: .secureConnectionFailed, sslError: .peerHandshakeFail,
            explanation: "the TLS handshake with \(i.host) failed: \(facts.failure.map { "\($0)" } ?? "unknown error")",
            fix: .noExceptionCanHelp(reason: "the server accepts no TLS handshake this client can make"))]
    }

    private func upstreamHandshakeCompleted(_ i: Interception, _ engine: TLSEngine) {
        i.upstreamALPN = engine.negotiated?.alpn
        var facts = env.factsCollector.facts(from: engine, host: i.host)
        if let failure = i.iOSLikeFailure, let negotiated = engine.negotiated {
            // The permissive probe succeeded after the iOS-like attempt failed: judge the failure, explained by
            // what the server chose when offered everything.
            let caps = ServerCapabilities(
                supportedVersions: negotiated.version.map { [$0] } ?? [],
                preferredCipherCode: negotiated.cipherSuiteCode, preferredCipherName: negotiated.cipherSuiteName,
                supportsForwardSecrecy: negotiated.isForwardSecret)
            facts.failure = HandshakeFactsCollector.handshakeFailure(failure)
            facts.serverCapabilities = caps
        }
        // A resumed handshake's certificate facts are those of the session's first, full handshake; the policy
        // is still evaluated here, on every connection, at the current time.
        traceHandshake(i, facts, resumed: engine.sessionReused)
        if let req = i.requirements {
            i.violations = env.policy.evaluate(facts, against: req).violations
            if i.iOSLikeFailure != nil { i.violations = violationsOrFailure(i.violations, facts, i) }
        }
        let answer = ATSAnswer(url: i.url, decision: i.decision, violations: i.violations)
        if i.requirements == nil {
            // --ats off judges no ATS rule, but the device still verifies the certificate: a forged or
            // misnamed upstream must not reach the client re-signed by the proxy's trusted CA.
            let untrusted = defaultTrustViolations(facts, i)
            if untrusted.isEmpty || env.insecureUpstream {
                i.outcome = .notEvaluated
                var action = "not evaluated (--ats off)"
                if let first = untrusted.first {
                    action += "; --insecure-upstream: relayed although the device would not trust it: \(first.explanation)"
                    notice("\(i.host):\(i.port): --insecure-upstream: relaying an upstream the device would not trust "
                        + "(\(first.explanation)); the client sees it as trusted")
                }
                traceDecision(url: i.url, decision: i.decision, violations: untrusted, action: action)
                proceedWithClient(i)
            } else {
                i.violations = untrusted
                i.outcome = .failed
                commands.append(.closeUpstream)
                upstreamOpen = false
                i.upstream = nil
                blockClient(i, style: env.blockStyle)
            }
        } else if i.violations.isEmpty {
            i.outcome = .allowed
            if env.mode == .annotate { i.annotation = answer.headers }
            traceDecision(url: i.url, decision: i.decision, violations: [], action: "allowed")
            proceedWithClient(i)
        } else if env.mode == .annotate {
            i.outcome = .violation
            i.annotation = answer.headers
            traceDecision(
                url: i.url, decision: i.decision, violations: i.violations,
                action: "annotated: relayed, although the app refuses this connection")
            proceedWithClient(i)
        } else {
            i.outcome = .blocked
            commands.append(.closeUpstream)
            upstreamOpen = false
            i.upstream = nil
            blockClient(i, style: env.blockStyle)
        }
    }

    /// What fails the device's own certificate check with ATS out of the way (untrusted chain, wrong name, the
    /// rules iOS applies to every connection), for `--ats off`.
    private func defaultTrustViolations(_ facts: HandshakeFacts, _ i: Interception) -> [ATSViolation] {
        let policy = env.defaultTrustPolicy
        guard case .proceed(let req) = policy.requirements(for: ConnectionTarget(scheme: "https", host: i.host, port: i.port))
        else { return [] }
        return policy.evaluate(facts, against: req).violations
    }

    private func traceHandshake(_ i: Interception, _ facts: HandshakeFacts, resumed: Bool = false) {
        trace(.tlsHandshake(connectionID: id, facts: facts, resumed: resumed))
        if env.jsonEvents {
            commands.append(.log(.event(TraceEvent(
                kind: .tlsHandshake, time: now(), connectionID: id, url: i.url, handshake: facts,
                sessionResumed: facts.failure == nil ? resumed : nil))))
        }
    }

    // MARK: - Blocking

    /// Makes the client fail the way the app would (`--block tls`), or answers every request with the violation
    /// (`--block http`).
    private func blockClient(_ i: Interception, style: BlockStyle) {
        guard i.resumeStage == nil else {
            // The client's handshake was already answered before the retry: its connection can only be closed.
            notice("\(i.host):\(i.port): the retried upstream connection failed; closing the client")
            closeAll()
            return
        }
        let answer = ATSAnswer(url: i.url, decision: i.decision, violations: i.violations)
        switch style {
        case .http:
            // An unreachable or silent server is no ATS verdict: the 502 stands in for the app's network error.
            let action = i.outcome == .failed
                ? "not an ATS verdict: \(i.violations.first?.explanation ?? "the server failed"); every request "
                    + "answered \(answer.blockStatus)"
                : "blocked: every request answered \(answer.blockStatus)"
            traceDecision(url: i.url, decision: i.decision, violations: i.violations, action: action)
            i.blockAnswer = answer
            startClientHandshake(i, leaf: .standard)
        case .tls:
            // The app's task fails here, before any request: its error names the connection's URL.
            if let first = i.violations.first {
                trace(.responseError(url: i.url, error: NSErrorDescription(violation: first, failingURL: i.url)))
            }
            switch BlockPlan(for: i.violations.first, upstreamLeafName: nil, now: Date(timeIntervalSince1970: now())) {
            case .alert(let alert):
                traceDecision(url: i.url, decision: i.decision, violations: i.violations, action: "blocked: client handshake refused with \(alert)")
                logBlockedConnection(i)
                failClientHandshake(i, alert: alert)
            case .flawedLeaf(let options, let flaw):
                traceDecision(
                    url: i.url, decision: i.decision, violations: i.violations,
                    action: "blocked: client gets a leaf that is \(flaw)")
                i.refusalToLog = true
                // Should the client accept the flawed leaf anyway (its TLS library does not check that flaw, or
                // curl -k), its requests still get the answer: see `clientAcceptedFlawedLeaf`.
                i.flawedLeaf = flaw
                i.blockAnswer = answer
                startClientHandshake(i, leaf: options)
            }
        }
    }

    /// Logs a flawed-leaf refusal the client has acted on (see `Interception.refusalToLog`); called as the
    /// connection ends.
    func logRefusalIfClientRefused() {
        guard let i = interception, i.refusalToLog else { return }
        i.refusalToLog = false
        if i.blockFallback == nil { logBlockedConnection(i) }
    }

    /// A connection refused in its TLS handshake (`--block tls`) is an exchange of its own in the console and the
    /// JSON log: the app's task ends there.
    private func logBlockedConnection(_ i: Interception) {
        let summary = ExchangeSummary(
            method: "CONNECT", url: i.url, status: nil, httpVersion: "TLS",
            outcome: i.outcome == .failed ? .failed : .blocked,
            errors: i.violations.map(ExchangeError.init), requestBytes: 0, responseBytes: 0,
            durationMilliseconds: (now() - i.started) * 1000)
        recordExchange(summary)
    }

    private func failClientHandshake(_ i: Interception, alert: TLSAlert) {
        do {
            let context = try serverContext(for: i, leaf: .standard)
            let engine = try TLSEngine(context: context)
            engine.abortHandshake(with: alert)
            engine.feed(i.pendingClientBytes)
            i.pendingClientBytes = []
            _ = engine.handshake()
            let out = engine.takeOutput()
            if !out.isEmpty { commands.append(.sendToClient(out)) }
        } catch {
            notice("\(i.host): cannot build the refusing TLS server: \(error)")
        }
        i.stage = .failed
        closeAll()
    }

    // MARK: - Client handshake

    private func serverContext(for i: Interception, leaf: LeafOptions) throws -> TLSContext {
        try env.contexts.context(key: .server(host: i.host, leaf: leaf)) { () throws(OpenSSLError) in
            let identity: TLSConfiguration.ServerIdentity
            do { identity = try env.minter.identity(for: i.host, options: leaf) } catch {
                throw OpenSSLError(context: "minting a certificate for \(i.host): \(error)", entries: [])
            }
            var configuration = TLSConfiguration.server(identity: identity, alpn: ["h2", "http/1.1"])
            // OpenSSL's default security level refuses to load the deliberately weak leaves (SHA-1 signed,
            // RSA-1024) that --block tls serves; the client must get them and fail its own trust check.
            if leaf != .standard { configuration.securityLevel = 0 }
            return try TLSContext(configuration)
        }
    }

    /// After an upstream handshake: start the client's, or resume the client side a retry had put on hold (with
    /// the client's TLS bytes that arrived meanwhile).
    private func proceedWithClient(_ i: Interception) {
        guard let resumed = i.resumeStage, let engine = i.client else {
            startClientHandshake(i, leaf: .standard)
            return
        }
        i.resumeStage = nil
        let held = i.pendingClientBytes
        i.pendingClientBytes = []
        if resumed == .relaying {
            i.stage = .relaying
            startRelaying(i, engine)
            if let replay = i.unansweredClientPlaintext, !replay.isEmpty, let relay {
                apply(relay.clientBytes(replay), tls: true)
            }
            held.withUnsafeBytes { readClient(i, incoming: $0) }
        } else {
            i.stage = .clientHandshake
            startClientHandshakeDeadline()
            engine.feed(held)
            stepClientHandshake(i)
        }
    }

    private func startClientHandshake(_ i: Interception, leaf: LeafOptions) {
        do {
            // ALPN mirroring: the upstream's choice when the client offered it, else what the client can speak
            // (the relay translates). Blocked connections have no upstream: HTTP/1.1 unless the client offered h2
            // alone.
            let preference = i.blockAnswer == nil
                ? UpstreamALPN.clientAnswer(clientOffer: i.hello.alpnProtocols, upstreamChoice: i.upstreamALPN)
                : UpstreamALPN.clientAnswer(clientOffer: i.hello.alpnProtocols, upstreamChoice: "http/1.1")
            let engine = try TLSEngine(context: try serverContext(for: i, leaf: leaf), alpn: preference)
            i.client = engine
            i.stage = .clientHandshake
            startClientHandshakeDeadline()
            engine.feed(i.pendingClientBytes)
            i.pendingClientBytes = []
            stepClientHandshake(i)
        } catch {
            notice("\(i.host): cannot build the TLS server for the client: \(error)")
            closeAll()
        }
    }

    func interceptClientBytes(_ bytes: [UInt8]) {
        guard let i = interception else { return }
        switch i.stage {
        case .connectingUpstream, .upstreamHandshake:
            i.pendingClientBytes += bytes
        case .clientHandshake:
            i.client?.feed(bytes)
            stepClientHandshake(i)
        case .relaying:
            bytes.withUnsafeBytes { readClient(i, incoming: $0) }
        case .failed:
            break
        }
    }

    func interceptClientEOF() {
        guard let i = interception else { return }
        i.client?.feedEndOfInput()
        switch i.stage {
        case .clientHandshake:
            stepClientHandshake(i)
        case .relaying:
            readClient(i)
            if i.raw {
                upgradeEnded(by: "the client closed it")
                if upstreamOpen { commands.append(.shutdownUpstreamWrite) }
            } else if let relay {
                apply(relay.clientEOF(), tls: true)
                if !isDone { closeAll(tlsClose: true) }
            }
        default:
            closeAll()
        }
    }

    private func stepClientHandshake(_ i: Interception) {
        guard let engine = i.client else { return }
        let step = engine.handshake()
        let out = engine.takeOutput()
        if !out.isEmpty { commands.append(.sendToClient(out)) }
        switch step {
        case .needsMoreInput:
            return
        case .failed(let error):
            clientHandshakeFailed(i, error)
        case .complete:
            i.stage = .relaying
            startRelaying(i, engine)
            readClient(i)
            // Bytes the upstream sent before the client was ready (rare for HTTP/1.1).
            if i.upstream != nil { readUpstream(i) }
        }
    }

    /// `--block tls` did not make the client refuse the flawed leaf, since it sends requests: its TLS library does
    /// not check that flaw (Apple's limits on validity periods and its EKU rule are Apple's own; a lowered OpenSSL
    /// security level takes RSA-1024 and SHA-1; curl -k takes anything). Say so once per connection, since every
    /// request now gets the block answer instead.
    private func clientAcceptedFlawedLeaf(_ i: Interception, flaw: String, status: Int) {
        notice("\(i.host):\(i.port): --block tls fell back to answering requests \(status): the client accepted the "
            + "flawed leaf (\(flaw)) meant to fail its handshake as the app's fails, because its TLS library does "
            + "not check that flaw (or its checks are off, as with curl -k); every request gets the violation, as "
            + "with --block http")
        i.refusalToLog = false
        i.blockFallback = "--block tls fallback: the client accepted the flawed leaf (\(flaw)): its TLS library does "
            + "not check that, or its checks are off"
    }

    /// Picks the relay for the protocols both sides negotiated, translating where they differ.
    private func startRelaying(_ i: Interception, _ engine: TLSEngine) {
        let decide: (HTTPRequestHead) -> RequestDecision = { [unowned self, unowned i] head in
            self.decideIntercepted(head, i)
        }
        let clientH2 = engine.negotiated?.alpn == "h2"
        let upstreamH2 = i.upstreamALPN == "h2" && i.upstream != nil
        do {
            switch (clientH2, upstreamH2) {
            case (true, true): relay = try H2Relay(now: now, decide: decide)
            case (true, false): relay = try H2ToH1Relay(primaryConnected: i.upstream != nil, now: now, decide: decide)
            case (false, true): relay = try H1ToH2Relay(now: now, decide: decide)
            case (false, false):
                relay = HTTP1Relay(connectedTo: UpstreamTarget(host: i.host, port: i.port), now: now, decide: decide)
            }
        } catch {
            notice("\(i.host): cannot start HTTP/2: \(error)")
            closeAll()
            return
        }
        // HTTP/2 sessions start with their connection preface and SETTINGS.
        if clientH2 || upstreamH2, let relay { apply(relay.upstreamBytes([]), tls: true) }
    }

    private func clientHandshakeFailed(_ i: Interception, _ error: TLSError) {
        i.stage = .failed
        if case .aborted = error {
            closeAll()
            return
        }
        var hint = ""
        if case .peerAlert(let alert) = error {
            switch alert {
            case .unknownCA, .badCertificate, .certificateUnknown:
                hint = i.flawedLeaf != nil
                    ? " (expected: ATSProxy served a deliberately flawed certificate to reproduce the app's failure)"
                    : " (the client does not trust ATSProxy's CA: install it and, on iOS, enable full trust in "
                        + "Settings › General › About › Certificate Trust Settings)"
            default: break
            }
        } else if case .closedByPeer = error {
            hint = " (a client that closes during the handshake often does not trust the proxy's certificate, or pins)"
        }
        // The client refusing a flawed leaf served on purpose is the expected outcome, not news.
        if i.flawedLeaf == nil {
            // Folded by the failure, not the host: a device that does not trust the CA fails this way for every host.
            notice("\(i.host):\(i.port): the client's TLS handshake failed: \(error)\(hint)",
                kind: "client handshake failed: \(error)")
        }
        closeAll()
    }

    // MARK: - Relaying

    private func decideIntercepted(_ head: HTTPRequestHead, _ i: Interception) -> RequestDecision {
        let url = i.url + (head.target.hasPrefix("/") ? head.target : "/" + head.target)
        // The app would speak to the server directly: the trace shows the upstream's protocol when the proxy
        // translates, and the client's when there is no upstream (block answers).
        let protocolName = i.blockAnswer == nil ? i.upstreamALPN : i.client?.negotiated?.alpn
        let version = protocolName == "h2" ? "HTTP/2.0" : "HTTP/1.1"
        let codes = i.violations.map(ExchangeError.init)
        if var answer = i.blockAnswer {
            // A completed handshake does not tell: curl checks the host name only after it. A request does.
            if let flaw = i.flawedLeaf, i.blockFallback == nil {
                clientAcceptedFlawedLeaf(i, flaw: flaw, status: answer.blockStatus)
            }
            // The app's task fails in the TLS handshake, so nothing is enqueued; its error names this request's URL.
            answer.url = url
            if i.blockFallback != nil { answer.acceptedFlaw = i.flawedLeaf }
            trace(.loaderWhatToDo(method: head.method, url: url))
            if let first = i.violations.first {
                trace(.responseError(url: url, error: NSErrorDescription(violation: first, failingURL: url)))
            }
            var response = HTTPResponseHead(status: answer.blockStatus, reason: answer.blockStatus == 403 ? "Forbidden" : "Bad Gateway")
            response.headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
            for (n, v) in answer.headers { response.headers.add(name: n, value: v) }
            return .answer(
                head: response, body: Array(answer.blockBody.utf8), url: url,
                outcome: i.outcome == .failed ? .failed : .blocked, codes: codes)
        }
        traceRequestStart(method: head.method, url: url, head: head, httpVersion: version)
        return .forward(head: head, url: url, upstream: nil, annotation: i.annotation, outcome: i.outcome, codes: codes)
    }

    /// Everything `engine` has decrypted so far, with `incoming` lent to it, and whether the peer's side ended
    /// (close_notify, or a TCP close without it, which is how most peers end). A TLS error counts as the end too,
    /// with the error.
    ///
    /// OpenSSL reads `incoming` where it is (`withLentInput`), and the plaintext is read into one array sized by
    /// what is buffered and fed (decrypting never makes bytes longer): a socket read of several records costs one
    /// allocation and no copying of one record's bytes onto the next's.
    func drain(_ engine: TLSEngine, feeding incoming: UnsafeRawBufferPointer = .init(start: nil, count: 0)) -> (
        plaintext: [UInt8], ended: Bool, error: TLSError?
    ) {
        engine.withLentInput(incoming) {
            var plaintext: [UInt8] = []
            var ended = false
            var error: TLSError?
            var done = false
            // One pass unless the bound was short (then the next array is appended); every pass reads or ends.
            while !done {
                let piece = [UInt8](unsafeUninitializedCapacity: max(1, engine.readableBound)) { buffer, count in
                    let (n, stop) = engine.read(into: UnsafeMutableRawBufferPointer(buffer))
                    count = n
                    switch stop {
                    case .needsMoreInput:
                        done = true
                    case .bufferFull:
                        break
                    case .closed, .failed(.closedByPeer):
                        ended = true
                        done = true
                    case .failed(let failure):
                        ended = true
                        error = failure
                        done = true
                    }
                }
                if plaintext.isEmpty { plaintext = piece } else { plaintext += piece }
            }
            return (plaintext, ended, error)
        }
    }

    func readClient(_ i: Interception, incoming: UnsafeRawBufferPointer = .init(start: nil, count: 0)) {
        guard let engine = i.client else { return }
        let (plaintext, closed, error) = drain(engine, feeding: incoming)
        if let error {
            notice("\(i.host): TLS error from the client: \(error)", kind: "TLS error from the client")
            closeAll()
            return
        }
        let out = engine.takeOutput()
        if !out.isEmpty { commands.append(.sendToClient(out)) }
        if !plaintext.isEmpty {
            i.clientSpoke = true
            if let kept = i.unansweredClientPlaintext {
                i.unansweredClientPlaintext = kept.count + plaintext.count <= Interception.replayLimit ? kept + plaintext : nil
            }
            if i.raw {
                upgraded?.fromClient += plaintext.count
                interceptSendUpstream(plaintext)
            } else if let relay {
                apply(relay.clientBytes(plaintext), tls: true)
            }
        }
        if closed, !isDone {
            if i.raw {
                upgradeEnded(by: "the client closed it")
                i.upstream?.close()
                flushUpstreamTLS(i)
                if upstreamOpen { commands.append(.shutdownUpstreamWrite) }
            } else if let relay {
                apply(relay.clientEOF(), tls: true)
                if !isDone, relay.isIdle { closeAll(tlsClose: true) }
            }
        }
    }

    func readUpstream(_ i: Interception, incoming: UnsafeRawBufferPointer = .init(start: nil, count: 0)) {
        guard let engine = i.upstream, i.stage == .relaying else { return }
        let (plaintext, closed, error) = drain(engine, feeding: incoming)
        if let error { notice("\(i.host): TLS error from the upstream: \(error)") }
        flushUpstreamTLS(i)
        if !plaintext.isEmpty {
            i.unansweredClientPlaintext = nil
            if i.raw {
                upgraded?.toClient += plaintext.count
                interceptSendClient(plaintext)
            } else if let relay {
                apply(relay.upstreamBytes(plaintext), tls: true)
            }
        }
        // A close_notify can come before the TCP close: the retry check applies to it too.
        if closed, !retryOfferingH2IfClosedBeforeRequest(i) { upstreamGone(i) }
    }

    private func shutdownClientTLS(_ i: Interception) {
        closeAll(tlsClose: true)
    }

    private func flushUpstreamTLS(_ i: Interception) {
        guard let engine = i.upstream else { return }
        let out = engine.takeOutput()
        if !out.isEmpty, upstreamOpen { commands.append(.sendToUpstream(out)) }
    }

    func interceptSendUpstream(_ plaintext: [UInt8]) {
        guard let i = interception, let engine = i.upstream else { return }
        do { try engine.write(plaintext) } catch {
            notice("\(i.host): cannot write to the upstream TLS session: \(error)")
            closeAll()
            return
        }
        flushUpstreamTLS(i)
    }

    func interceptSendClient(_ plaintext: [UInt8]) {
        // Nothing goes to a client after its connection was closed (an upstream write just failed, say).
        guard !clientClosed, let i = interception, let engine = i.client else { return }
        do { try engine.write(plaintext) } catch {
            notice("\(i.host): cannot write to the client TLS session: \(error)")
            closeAll()
            return
        }
        let out = engine.takeOutput()
        if !out.isEmpty { commands.append(.sendToClient(out)) }
    }
}

extension ProxySession {
    /// A quiet connection gives its TLS record buffers back; they come back with the next record. This is what
    /// keeps a thousand idle intercepted connections small without paying for buffers on every record.
    func releaseBuffers(of peer: ProxyPeer) {
        guard let i = interception else { return }
        switch peer {
        case .client:
            i.client?.releaseBuffers()
            relay?.releaseBuffers()
        case .upstream: i.upstream?.releaseBuffers()
        case .lane(let lane): i.lanes[lane]?.engine?.releaseBuffers()
        }
    }
}
