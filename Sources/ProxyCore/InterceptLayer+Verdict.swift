import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import TLSCore

// Theory of operation: the upstream handshake of an interception and the verdict on it.
//
// 1. The first handshake offers what iOS would for the host's requirements. If it fails, a permissive probe (every
//    version and suite) learns what the server supports, so the verdict can say why; a no_application_protocol
//    refusal is retried offering h2 and http/1.1 instead (InterceptLayer+Upstream).
// 2. The facts (negotiated version and suite, the chain judged at the session's clock) are evaluated against the
//    requirements; under `--ats off`, against what the device checks with ATS out of the way (its trust).
// 3. VerdictAction turns the verdict into relaying (the client's handshake starts, InterceptLayer+Client) or a block
//    (InterceptLayer+Block), and sets the outcome every exchange of the connection is logged with.

extension SessionContext {
    func stepUpstreamHandshake(_ i: InterceptLayer) {
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

    func upstreamHandshakeFailed(_ i: InterceptLayer, _ error: TLSError) {
        commands.append(.closeUpstream)
        i.upstreamOpen = false
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
        if i.attempt == .iOSLike, env.mode == .mirror {
            // Mirror mode learns the suite the server would choose for an iOS client with every exception first.
            i.iOSLikeFailure = error
            i.attempt = .iOSWidest
            connectInterceptionUpstream(i, reason: "ATSProxy's probe, not the app's: attempt \(i.connectAttempts)'s "
                + "handshake failed (\(error)); offering what iOS offers with every exception (TLS 1.0-1.3, the "
                + "forward-secret and static-RSA suites) to learn what the server would choose for the device")
            return
        }
        if i.attempt == .iOSLike || i.attempt == .iOSWidest {
            // Learn what the server does support, so the verdict can explain the failure.
            if i.iOSLikeFailure == nil { i.iOSLikeFailure = error }
            i.attempt = .permissive
            connectInterceptionUpstream(i, reason: "ATSProxy's probe, not the app's: attempt \(i.connectAttempts)'s "
                + "handshake failed (\(error)); every TLS version and cipher suite is offered to learn why")
            return
        }
        let firstError = i.iOSLikeFailure ?? error
        let facts = env.factsCollector.facts(
            failure: HandshakeFactsCollector.handshakeFailure(firstError), now: clockDate)
        traceHandshake(i, facts)
        if let req = i.requirements {
            i.violations = violationsOrFailure(env.policy.evaluate(facts, against: req).violations, facts, i)
        } else {
            i.violations = violationsOrFailure([], facts, i)
        }
        notice("\(i.host):\(i.port): the upstream TLS handshake failed even with every version and suite offered "
            + "(\(error)); answering the client with the error")
        // Annotate relays what it can; with no handshake there is nothing to relay, and the answer explains why.
        let source: Verdict.Source = i.requirements == nil ? .notEvaluated : .policy
        actWithoutUpstream(i, Verdict(source: source, violations: i.violations, relayable: false))
    }

    /// Carries out the action for a verdict reached with no upstream to relay to (it could not be reached, did not
    /// answer, or no handshake with it succeeded): the client gets the verdict in the way the action says.
    func actWithoutUpstream(_ i: InterceptLayer, _ verdict: Verdict) {
        let action = VerdictAction(for: verdict, mode: env.mode, blockStyle: env.blockStyle)
        i.outcome = action.outcome
        switch action {
        case .block(_, let style): blockClient(i, style: style)
        case .relay: proceedWithClient(i)
        }
    }

    func violationsOrFailure(_ found: [ATSViolation], _ facts: HandshakeFacts, _ i: InterceptLayer) -> [ATSViolation] {
        if !found.isEmpty { return found }
        return [ATSViolation(
            kind: .noSharedCipherOrVersion, urlError: .secureConnectionFailed, sslError: .peerHandshakeFail,
            explanation: "the TLS handshake with \(i.host) failed: \(facts.failure.map { "\($0)" } ?? "unknown error")",
            fix: .noExceptionCanHelp(reason: "the server accepts no TLS handshake this client can make"))]
    }

    func upstreamHandshakeCompleted(_ i: InterceptLayer, _ engine: TLSEngine) {
        i.upstreamALPN = engine.negotiated?.alpn
        var facts = env.factsCollector.facts(from: engine, host: i.host, now: clockDate)
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
        i.legs.upstreamFacts = facts
        if env.recording != nil { i.legs.upstream = TLSLegFacts(engine, serverName: i.upstreamSNI) }
        if let req = i.requirements {
            i.violations = env.policy.evaluate(facts, against: req).violations
            if i.iOSLikeFailure != nil { i.violations = violationsOrFailure(i.violations, facts, i) }
        }
        // --ats off judges no ATS rule, but the device still verifies the certificate: a forged or misnamed upstream
        // must not reach the client re-signed by the proxy's trusted CA.
        let verdict = i.requirements == nil
            ? Verdict(source: .notATS, violations: defaultTrustViolations(facts, i))
            : Verdict(source: .policy, violations: i.violations)
        let action = VerdictAction(
            for: verdict, mode: env.mode, blockStyle: env.blockStyle, toleratesUntrusted: env.insecureUpstream)
        i.outcome = action.outcome
        if env.mode == .mirror, case .relay = action { prepareMirror(i, facts, engine) }
        switch action {
        case .relay(_, let annotate):
            if annotate { i.annotation = ATSAnswer(url: i.url, decision: i.decision, violations: i.violations).headers }
            var text: String
            if let mirror = i.mirror {
                text = mirrorActionText(mirror.plan)
            } else if i.requirements == nil {
                text = "not evaluated (--ats off)"
                if let first = verdict.violations.first {
                    text += "; --insecure-upstream: relayed although the device would not trust it: "
                        + first.explanation
                    notice("\(i.host):\(i.port): --insecure-upstream: relaying an upstream the device would not trust "
                        + "(\(first.explanation)); the client sees it as trusted")
                }
            } else {
                text = i.violations.isEmpty ? "allowed" : "annotated: relayed, although the app refuses this connection"
            }
            traceDecision(url: i.url, decision: i.decision, violations: verdict.violations, action: text)
            proceedWithClient(i)
        case .block(_, let style):
            i.violations = verdict.violations
            commands.append(.closeUpstream)
            i.upstreamOpen = false
            i.upstream = nil
            blockClient(i, style: style)
        }
    }

    /// What fails the device's own certificate check with ATS out of the way (untrusted chain, wrong name, the
    /// rules iOS applies to every connection), for `--ats off`.
    func defaultTrustViolations(_ facts: HandshakeFacts, _ i: InterceptLayer) -> [ATSViolation] {
        let policy = env.defaultTrustPolicy
        guard case .proceed(let req) = policy.requirements(for: ConnectionTarget(scheme: "https", host: i.host, port: i.port))
        else { return [] }
        return policy.evaluate(facts, against: req).violations
    }

    func traceHandshake(_ i: InterceptLayer, _ facts: HandshakeFacts, resumed: Bool = false) {
        trace(.tlsHandshake(connectionID: id, facts: facts, resumed: resumed))
        if env.jsonEvents {
            commands.append(.log(.event(TraceEvent(
                kind: .tlsHandshake, time: now(), connectionID: id, url: i.url, handshake: facts,
                sessionResumed: facts.failure == nil ? resumed : nil))))
        }
    }
}
