import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import TLSCore

// Theory of operation: how an intercepted connection is refused, once VerdictAction chose a block.
//
// - `--block http` (and every failure that is no ATS verdict): the client's handshake completes with a standard
//   leaf and each request is answered with the verdict (ATSAnswer: 502, or 403 for -1022), as the app's task fails.
// - `--block tls`: the client's own handshake fails as the app's would (BlockPlan): a fatal alert for version and
//   suite violations, a leaf with the upstream's flaw for certificate violations. A client that accepts the flawed
//   leaf anyway (its TLS library does not check that flaw) gets the HTTP answer, with a notice and a note on its
//   lines; the refusal is logged only once the client has acted on it.
// - A client whose handshake was already answered before a retried upstream failed can only be closed.

/// How an intercepted connection is refused, once it is (see the theory of operation above).
struct BlockState {
    /// Set in `--block http` mode, and after a block-by-certificate when the client accepted the flawed leaf anyway.
    var answer: ATSAnswer?
    /// The flaw of the leaf `--block tls` served to reproduce a certificate violation.
    var flawedLeaf: String?
    /// Set when the client accepted that leaf anyway: why its requests get the block answer instead (console note).
    var fallback: String?
    /// The flawed-leaf refusal waits to be logged until the client has refused the leaf (its handshake fails, or
    /// it closes without a request): a client that accepts it gets the fallback note on its requests instead.
    var refusalToLog = false
}

extension InterceptLayer {
    /// Makes the client fail the way the app would (`--block tls`), or answers every request with the violation
    /// (`--block http`).
    func blockClient(_ ctx: SessionContext, style: BlockStyle) {
        guard client.resumeStage == nil else {
            // The client's handshake was already answered before the retry: its connection can only be closed.
            ctx.notice("\(host):\(port): the retried upstream connection failed; closing the client")
            ctx.closeAll()
            return
        }
        let answer = ATSAnswer(url: url, decision: decision, violations: violations)
        switch style {
        case .http:
            // An unreachable or silent server is no ATS verdict: the 502 stands in for the app's network error.
            let action = outcome == .failed
                ? "not an ATS verdict: \(violations.first?.explanation ?? "the server failed"); every request "
                    + "answered \(answer.blockStatus)"
                : "blocked: every request answered \(answer.blockStatus)"
            ctx.traceDecision(url: url, decision: decision, violations: violations, action: action)
            block.answer = answer
            startClientHandshake(ctx, leaf: .standard)
        case .tls:
            // The app's task fails here, before any request: its error names the connection's URL.
            if let first = violations.first {
                ctx.trace(.responseError(url: url, error: NSErrorDescription(violation: first, failingURL: url)))
            }
            // A wrong-host leaf names what the upstream's leaf names: the flaw the device would really meet.
            let upstreamName = legs.upstreamFacts?.chain.first?.dnsNames.first
            switch BlockPlan(for: violations.first, upstreamLeafName: upstreamName, now: ctx.clockDate) {
            case .alert(let alert):
                ctx.traceDecision(url: url, decision: decision, violations: violations, action: "blocked: client handshake refused with \(alert)")
                logBlockedConnection(ctx)
                failClientHandshake(ctx, alert: alert)
            case .flawedLeaf(let options, let flaw):
                ctx.traceDecision(
                    url: url, decision: decision, violations: violations,
                    action: "blocked: client gets a leaf that is \(flaw)")
                block.refusalToLog = true
                // Should the client accept the flawed leaf anyway (its TLS library does not check that flaw, or
                // curl -k), its requests still get the answer: see `clientAcceptedFlawedLeaf`.
                block.flawedLeaf = flaw
                block.answer = answer
                startClientHandshake(ctx, leaf: options)
            }
        }
    }

    /// Logs a flawed-leaf refusal the client has acted on (see `BlockState.refusalToLog`); called as the
    /// connection ends.
    func logRefusalIfClientRefused(_ ctx: SessionContext) {
        mirrorConnectionEnding(ctx)
        if fault != nil { faultConnectionEnding(ctx) }
        guard block.refusalToLog else { return }
        block.refusalToLog = false
        if block.fallback == nil { logBlockedConnection(ctx) }
    }

    /// A connection refused in its TLS handshake (`--block tls`) is an exchange of its own in the console and the
    /// JSON log: the app's task ends there.
    func logBlockedConnection(_ ctx: SessionContext) {
        let summary = ExchangeSummary(
            method: "CONNECT", url: url, status: nil, kind: .refusedHandshake,
            outcome: outcome == .failed ? .failed : .blocked,
            errors: violations.map(ExchangeError.init), requestBytes: 0, responseBytes: 0,
            durationMilliseconds: (ctx.now() - started) * 1000)
        ctx.recordExchange(summary)
    }

    func failClientHandshake(_ ctx: SessionContext, alert: TLSAlert) {
        do {
            let context = try serverContext(ctx, leaf: .standard)
            let engine = try TLSEngine(context: context)
            engine.abortHandshake(with: alert)
            engine.feed(client.takePendingBytes(ctx))
            _ = engine.handshake()
            let out = engine.takeOutput()
            if !out.isEmpty { ctx.commands.append(.sendToClient(out)) }
        } catch {
            ctx.notice("\(host): cannot build the refusing TLS server: \(error)")
        }
        stage = .failed
        ctx.closeAll()
    }

    /// `--block tls` did not make the client refuse the flawed leaf, since it sends requests: its TLS library does
    /// not check that flaw (Apple's limits on validity periods and its EKU rule are Apple's own; a lowered OpenSSL
    /// security level takes RSA-1024 and SHA-1; curl -k takes anything). Say so once per connection, since every
    /// request now gets the block answer instead.
    func clientAcceptedFlawedLeaf(_ ctx: SessionContext, flaw: String, status: Int) {
        ctx.notice("\(host):\(port): --block tls fell back to answering requests \(status): the client accepted the "
            + "flawed leaf (\(flaw)) meant to fail its handshake as the app's fails, because its TLS library does "
            + "not check that flaw (or its checks are off, as with curl -k); every request gets the violation, as "
            + "with --block http")
        block.refusalToLog = false
        block.fallback = "--block tls fallback: the client accepted the flawed leaf (\(flaw)): its TLS library does "
            + "not check that, or its checks are off"
    }
}
