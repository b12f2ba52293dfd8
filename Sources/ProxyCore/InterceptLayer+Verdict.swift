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

extension InterceptLayer {
    func stepUpstreamHandshake(_ ctx: SessionContext) {
        guard let engine = upstream.engine else { return }
        let step = engine.handshake()
        let out = engine.takeOutput()
        if !out.isEmpty { ctx.commands.append(.sendToUpstream(out)) }
        switch step {
        case .needsMoreInput:
            return
        case .complete:
            upstreamHandshakeCompleted(ctx, engine)
        case .failed(let error):
            upstreamHandshakeFailed(ctx, error)
        }
    }

    func upstreamHandshakeFailed(_ ctx: SessionContext, _ error: TLSError) {
        upstream.drop(ctx)
        if let reason = upstream.widenAfterALPNRefusal(ctx, error, clientOffer: hello.alpnProtocols)
            ?? upstream.nextProbe(after: error, mode: ctx.env.mode)
        {
            connectUpstream(ctx, reason: reason)
            return
        }
        let firstError = upstream.iOSLikeFailure ?? error
        let facts = ctx.env.factsCollector.facts(
            failure: HandshakeFactsCollector.handshakeFailure(firstError), now: ctx.clockDate)
        traceHandshake(ctx, facts)
        if let req = requirements {
            violations = violationsOrFailure(ctx, ctx.env.policy.evaluate(facts, against: req).violations, facts)
        } else {
            violations = violationsOrFailure(ctx, [], facts)
        }
        ctx.notice("\(host):\(port): the upstream TLS handshake failed even with every version and suite offered "
            + "(\(error)); answering the client with the error")
        // Annotate relays what it can; with no handshake there is nothing to relay, and the answer explains why.
        let source: Verdict.Source = requirements == nil ? .notEvaluated : .policy
        actWithoutUpstream(ctx, Verdict(source: source, violations: violations, relayable: false))
    }

    /// Carries out the action for a verdict reached with no upstream to relay to (it could not be reached, did not
    /// answer, or no handshake with it succeeded): the client gets the verdict in the way the action says.
    func actWithoutUpstream(_ ctx: SessionContext, _ verdict: Verdict) {
        let action = VerdictAction(for: verdict, mode: ctx.env.mode, blockStyle: ctx.env.blockStyle)
        outcome = action.outcome
        switch action {
        case .block(_, let style): blockClient(ctx, style: style)
        case .relay: proceedWithClient(ctx)
        }
    }

    func violationsOrFailure(_ ctx: SessionContext, _ found: [ATSViolation], _ facts: HandshakeFacts) -> [ATSViolation] {
        if !found.isEmpty { return found }
        return [ATSViolation(
            kind: .noSharedCipherOrVersion, urlError: .secureConnectionFailed, sslError: .peerHandshakeFail,
            explanation: "the TLS handshake with \(host) failed: \(facts.failure.map { "\($0)" } ?? "unknown error")",
            fix: .noExceptionCanHelp(reason: "the server accepts no TLS handshake this client can make"))]
    }

    func upstreamHandshakeCompleted(_ ctx: SessionContext, _ engine: TLSEngine) {
        upstream.alpn = engine.negotiated?.alpn
        var facts = ctx.env.factsCollector.facts(from: engine, host: host, now: ctx.clockDate)
        if let failure = upstream.iOSLikeFailure, let negotiated = engine.negotiated {
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
        traceHandshake(ctx, facts, resumed: engine.sessionReused)
        legs.upstreamFacts = facts
        if ctx.env.recording != nil { legs.upstream = TLSLegFacts(engine, serverName: upstream.sni) }
        if let req = requirements {
            violations = ctx.env.policy.evaluate(facts, against: req).violations
            if upstream.iOSLikeFailure != nil { violations = violationsOrFailure(ctx, violations, facts) }
        }
        // --ats off judges no ATS rule, but the device still verifies the certificate: a forged or misnamed upstream
        // must not reach the client re-signed by the proxy's trusted CA.
        let verdict = requirements == nil
            ? Verdict(source: .notATS, violations: defaultTrustViolations(ctx, facts))
            : Verdict(source: .policy, violations: violations)
        let action = VerdictAction(
            for: verdict, mode: ctx.env.mode, blockStyle: ctx.env.blockStyle, toleratesUntrusted: ctx.env.insecureUpstream)
        outcome = action.outcome
        if ctx.env.mode == .mirror, case .relay = action { prepareMirror(ctx, facts, engine) }
        switch action {
        case .relay(_, let annotate):
            if annotate { annotation = ATSAnswer(url: url, decision: decision, violations: violations).headers }
            var text: String
            if let mirror = self.mirror {
                text = mirrorActionText(mirror.plan)
            } else if requirements == nil {
                text = "not evaluated (--ats off)"
                if let first = verdict.violations.first {
                    text += "; --insecure-upstream: relayed although the device would not trust it: "
                        + first.explanation
                    ctx.notice("\(host):\(port): --insecure-upstream: relaying an upstream the device would not trust "
                        + "(\(first.explanation)); the client sees it as trusted")
                }
            } else {
                text = violations.isEmpty ? "allowed" : "annotated: relayed, although the app refuses this connection"
            }
            ctx.traceDecision(url: url, decision: decision, violations: verdict.violations, action: text)
            proceedWithClient(ctx)
        case .block(_, let style):
            violations = verdict.violations
            upstream.drop(ctx)
            blockClient(ctx, style: style)
        }
    }

    /// What fails the device's own certificate check with ATS out of the way (untrusted chain, wrong name, the
    /// rules iOS applies to every connection), for `--ats off`.
    func defaultTrustViolations(_ ctx: SessionContext, _ facts: HandshakeFacts) -> [ATSViolation] {
        let policy = ctx.env.defaultTrustPolicy
        guard case .proceed(let req) = policy.requirements(for: ConnectionTarget(scheme: "https", host: host, port: port))
        else { return [] }
        return policy.evaluate(facts, against: req).violations
    }

    func traceHandshake(_ ctx: SessionContext, _ facts: HandshakeFacts, resumed: Bool = false) {
        ctx.trace(.tlsHandshake(connectionID: ctx.id, facts: facts, resumed: resumed))
        if ctx.env.jsonEvents {
            ctx.commands.append(.log(.event(TraceEvent(
                kind: .tlsHandshake, time: ctx.now(), connectionID: ctx.id, url: url, handshake: facts,
                sessionResumed: facts.failure == nil ? resumed : nil))))
        }
    }
}
