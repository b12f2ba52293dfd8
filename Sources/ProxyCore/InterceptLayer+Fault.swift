import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import TLSCore

// Theory of operation: the client leg of a connection a rule fails on purpose (SessionContext+Faults). The layer
// has no upstream leg at all: nothing is connected.
//
// - A flawed server (certificate and protocol kinds): the client's handshake runs against the fault's plan, built
//   by mirror mode's machinery (`mirrorContext`: a leaf minted with the flaw, the versions and suites offered, at
//   OpenSSL security level 0 where the flaw needs it). A client that refuses it fails as the app's stack would;
//   its refusal (the alert it sent) is the connection's record. A client that accepts it anyway (curl -k, a
//   client that does not pin) has every request answered 502 by the proxy, each record carrying the rule; one
//   that completes the handshake and closes before any request (an OpenSSL client checking the host name) is
//   recorded as such.
// - Silence (`timeout`): the ClientHello is never answered; the connection ends when the client gives up, or at
//   `--client-timeout` (the client-handshake deadline), and is recorded then with how long the client waited.

/// What an intercepted connection failed on purpose keeps (see the theory of operation above). A class, as
/// MirrorState: a request asks only whether there is one, a pointer test, not a copy of the plan.
final class FaultState {
    let failure: InjectedFailure
    /// What the client did, in the record's words, once it acted (an alert, a close).
    var refusal: String?
    /// Requests answered on the connection (a client that accepted the flawed server).
    var answered = 0
    /// The connection's record was logged.
    var logged = false
    /// The proxy's --client-timeout ended a silent connection (not the client).
    var timedOut = false

    init(failure: InjectedFailure) {
        self.failure = failure
    }
}

extension InterceptLayer {
    /// Starts the client leg of a failed connection: the flawed server's handshake, or silence.
    func startInjectedClientLeg(_ ctx: SessionContext) {
        guard let fault else { return }
        if fault.failure.plan == .silence {
            // No TLS server at all: the hello is held unanswered until the client gives up or the deadline passes.
            stage = .clientHandshake
            ctx.startClientHandshakeDeadline()
            return
        }
        startClientHandshake(ctx, leaf: .standard)
    }

    /// The answer to a request on a connection whose client accepted the flawed server: nothing goes upstream.
    func injectedAnswer(_ ctx: SessionContext, url: String) -> RequestDecision? {
        guard let failure = fault?.failure else { return nil }
        fault?.answered += 1
        let body = "ATSProxy: injected failure, not the server's (\(failure.label)): the client accepted the flawed "
            + "server the rule showed it, which the app's stack would refuse (\(failure.codes)). Nothing was sent "
            + "to the server. Rule: \(failure.applied.map(\.summary).joined(separator: "; "))\n"
        var head = HTTPResponseHead(status: 502, reason: "Bad Gateway")
        head.headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        head.headers.add(name: "X-ATS-Injected-Fault", value: failure.label)
        return .answer(
            head: head, body: Array(body.utf8), url: url, outcome: .notEvaluated, codes: failure.errors,
            rules: ExchangeRules(applied: failure.applied, response: nil))
    }

    /// The connection ends: a client that made no request has its one record, saying what it did.
    func faultConnectionEnding(_ ctx: SessionContext) {
        guard let state = fault, !state.logged, state.answered == 0 else { return }
        state.logged = true
        let what: String
        if state.failure.plan == .silence {
            let waited = String(format: "%.1f s", max(0, ctx.now() - started))
            what = state.timedOut
                ? "the ClientHello was never answered; the proxy closed after \(waited) (--client-timeout)"
                : "the ClientHello was never answered; the client gave up after \(waited)"
        } else if let refusal = state.refusal {
            what = "the client refused the flawed server (\(refusal))"
        } else if client.handshakeDone != nil {
            what = "the client completed the handshake, then closed before any request (a check after the "
                + "handshake failed, such as an OpenSSL client's host-name check)"
        } else {
            what = "the client closed during the handshake"
        }
        ctx.logInjected(state.failure, url: url, status: nil, kind: .refusedHandshake, what: what)
    }
}
