import ATSPolicy
import ProxyTrace

// Theory of operation: every place the proxy acts on an ATS verdict goes through `VerdictAction(for:…)`.
//
// - A cleartext request (PlainLayer) is judged before connecting: its verdict's violations are the -1022 refusal.
// - An intercepted connection (InterceptLayer) is judged once its upstream handshake ended (or failed to start);
//   the action is kept on the layer, and each request on the connection is then forwarded or answered by it.
//
// The rules, in order:
// 1. No violation: relay; `allowed` when the policy judged it (annotated in `--ats annotate`), else `not evaluated`.
// 2. A failure that is no ATS verdict (unreachable, silent, a certificate the device refuses under `--ats off`):
//    relay when `--insecure-upstream` tolerates it and there is something to relay; else block as `failed`, with
//    the block style when there is an upstream to refuse, with an HTTP answer (the app's network error) when not.
// 3. A violation in `--ats annotate`: relay it annotated when there is something to relay, else answer it. In
//    `--ats mirror` the same, without the headers: the client leg shows the device the violation, and the device
//    decides.
// 4. A violation otherwise: block with the block style (cleartext requests have only the HTTP answer).

/// What the policy (or the failure standing in for it) found about one request or connection.
struct Verdict {
    enum Source {
        /// The ATS policy judged it.
        case policy
        /// `--ats off`: no ATS rule was applied.
        case notEvaluated
        /// No ATS verdict: the server could not be reached, did not answer, or failed the device's own trust check.
        case notATS
    }

    var source: Source
    var violations: [ATSViolation]
    /// Whether there is an upstream to relay to, should the verdict allow it (false when it could not be reached or
    /// its handshake failed).
    var relayable = true
}

/// What the proxy does about a verdict.
enum VerdictAction: Equatable {
    /// Relay the traffic; `annotate`: add the verdict's `X-ATS-*` fields to every response.
    case relay(outcome: ExchangeSummary.ATSOutcome, annotate: Bool)
    /// Refuse it the way `style` says (`.http`: answer each request with the violation).
    case block(outcome: ExchangeSummary.ATSOutcome, style: BlockStyle)

    /// The one mapping from a verdict to what is done about it (the rules at the top of this file).
    /// - Parameters:
    ///   - blockStyle: how a refusal is made where the proxy can choose (`.http` for cleartext requests).
    ///   - toleratesUntrusted: `--insecure-upstream`.
    init(for verdict: Verdict, mode: ATSMode, blockStyle: BlockStyle, toleratesUntrusted: Bool = false) {
        guard !verdict.violations.isEmpty else {
            let judged = verdict.source == .policy
            self = .relay(outcome: judged ? .allowed : .notEvaluated, annotate: judged && mode == .annotate)
            return
        }
        switch verdict.source {
        case .notATS:
            if verdict.relayable, toleratesUntrusted {
                self = .relay(outcome: .notEvaluated, annotate: false)
            } else {
                self = .block(outcome: .failed, style: verdict.relayable ? blockStyle : .http)
            }
        case .policy, .notEvaluated:
            if mode == .annotate || mode == .mirror {
                self = verdict.relayable
                    ? .relay(outcome: .violation, annotate: mode == .annotate) : .block(outcome: .blocked, style: .http)
            } else {
                self = .block(outcome: .blocked, style: blockStyle)
            }
        }
    }

    var outcome: ExchangeSummary.ATSOutcome {
        switch self {
        case .relay(let outcome, _), .block(let outcome, _): outcome
        }
    }
}
