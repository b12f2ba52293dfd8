import ATSPolicy
import Foundation

/// One observation judged under one policy: the pre-connect decision (refused with -1022, or the requirements),
/// then, for a secure load, the server's handshake facts evaluated against those requirements. Every verdict and
/// fix comes from ATSPolicy; this only chooses which facts to hand it.
struct Judgement {
    var verdict: LoadVerdict
    var decision: PolicyDecision?
    var violations: [ATSViolation]
    var note: String?

    /// True when every violation has a plist fix (so some policy lets the load through).
    var isFixable: Bool {
        violations.allSatisfy { if case .setKeys = $0.fix { true } else { false } }
    }
}

extension ATSPolicy {
    /// Judges `o` under this policy.
    func judge(_ o: Observation) -> Judgement {
        guard let target = o.target else {
            return Judgement(
                verdict: .notChecked, violations: [],
                note: "\(o.url) is not a URL the policy can be asked about (a tunnel whose client spoke no TLS)")
        }
        let requirements: ConnectionRequirements
        switch self.requirements(for: target) {
        case .blocked(let violation):
            return Judgement(verdict: .fails, decision: violation.decidedBy, violations: [violation])
        case .proceed(let r):
            requirements = r
        }
        let decision = requirements.decidedBy
        guard target.isSecure else { return Judgement(verdict: .allowed, decision: decision, violations: []) }
        switch o.carriage {
        case .tunnelled:
            return Judgement(
                verdict: .notChecked, decision: decision, violations: [],
                note: "tunnelled without interception: the server's TLS was not seen, only the pre-connect rules apply")
        case .unreachable:
            return Judgement(
                verdict: .notChecked, decision: decision, violations: [],
                note: "the server could not be reached, whatever the policy")
        case .observed:
            break
        }
        guard let recorded = o.handshake else {
            return Judgement(
                verdict: .notChecked, decision: decision, violations: [], note: "no upstream TLS facts were recorded")
        }
        let (facts, note) = Self.judgedFacts(recorded)
        var violations = evaluate(facts, against: requirements).violations
        if facts.failure != nil && facts.version == nil && facts.serverCapabilities == nil {
            // The permissive probe (every version and suite) was refused too: no iOS setting can do better.
            violations = violations.map { v in
                guard case .setKeys = v.fix else { return v }
                var changed = v
                changed.fix = .noExceptionCanHelp(
                    reason: "the server refused even ATSProxy's permissive probe (every TLS version and cipher suite "
                        + "offered), so no iOS setting can reach it; it must accept a TLS 1.2 handshake with an ATS "
                        + "suite")
                return changed
            }
        }
        return Judgement(
            verdict: violations.isEmpty ? .allowed : .fails, decision: decision, violations: violations, note: note)
    }

    /// The facts to judge: a handshake that failed under the capture's own policy and then completed with the
    /// proxy's permissive probe is judged by what the probe negotiated, as a completed handshake. The failure
    /// belonged to the capture's requirements; under a policy that offers that version and suite the same server
    /// completes the handshake, and under one that does not, the version and suite checks say why.
    static func judgedFacts(_ facts: HandshakeFacts) -> (HandshakeFacts, String?) {
        guard let failure = facts.failure, facts.version != nil else { return (facts, nil) }
        var completed = facts
        completed.failure = nil
        completed.serverCapabilities = nil
        return (
            completed,
            "judged by what the proxy's permissive probe negotiated; the app-like handshake at capture time failed "
                + "(\(failure))"
        )
    }
}
