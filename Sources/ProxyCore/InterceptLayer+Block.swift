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

extension ProxySession {
    /// Makes the client fail the way the app would (`--block tls`), or answers every request with the violation
    /// (`--block http`).
    func blockClient(_ i: InterceptLayer, style: BlockStyle) {
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
            // A wrong-host leaf names what the upstream's leaf names: the flaw the device would really meet.
            let upstreamName = i.legs.upstreamFacts?.chain.first?.dnsNames.first
            switch BlockPlan(for: i.violations.first, upstreamLeafName: upstreamName, now: clockDate) {
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

    /// Logs a flawed-leaf refusal the client has acted on (see `InterceptLayer.refusalToLog`); called as the
    /// connection ends.
    func logRefusalIfClientRefused() {
        mirrorConnectionEnding()
        guard let i = interception, i.refusalToLog else { return }
        i.refusalToLog = false
        if i.blockFallback == nil { logBlockedConnection(i) }
    }

    /// A connection refused in its TLS handshake (`--block tls`) is an exchange of its own in the console and the
    /// JSON log: the app's task ends there.
    func logBlockedConnection(_ i: InterceptLayer) {
        let summary = ExchangeSummary(
            method: "CONNECT", url: i.url, status: nil, kind: .refusedHandshake,
            outcome: i.outcome == .failed ? .failed : .blocked,
            errors: i.violations.map(ExchangeError.init), requestBytes: 0, responseBytes: 0,
            durationMilliseconds: (now() - i.started) * 1000)
        recordExchange(summary)
    }

    func failClientHandshake(_ i: InterceptLayer, alert: TLSAlert) {
        do {
            let context = try serverContext(for: i, leaf: .standard)
            let engine = try TLSEngine(context: context)
            engine.abortHandshake(with: alert)
            engine.feed(takePendingClientBytes(i))
            _ = engine.handshake()
            let out = engine.takeOutput()
            if !out.isEmpty { commands.append(.sendToClient(out)) }
        } catch {
            notice("\(i.host): cannot build the refusing TLS server: \(error)")
        }
        i.stage = .failed
        closeAll()
    }

    /// `--block tls` did not make the client refuse the flawed leaf, since it sends requests: its TLS library does
    /// not check that flaw (Apple's limits on validity periods and its EKU rule are Apple's own; a lowered OpenSSL
    /// security level takes RSA-1024 and SHA-1; curl -k takes anything). Say so once per connection, since every
    /// request now gets the block answer instead.
    func clientAcceptedFlawedLeaf(_ i: InterceptLayer, flaw: String, status: Int) {
        notice("\(i.host):\(i.port): --block tls fell back to answering requests \(status): the client accepted the "
            + "flawed leaf (\(flaw)) meant to fail its handshake as the app's fails, because its TLS library does "
            + "not check that flaw (or its checks are off, as with curl -k); every request gets the violation, as "
            + "with --block http")
        i.refusalToLog = false
        i.blockFallback = "--block tls fallback: the client accepted the flawed leaf (\(flaw)): its TLS library does "
            + "not check that, or its checks are off"
    }
}
