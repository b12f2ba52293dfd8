import FilterCore
import HTTP1Core
import ProxyTrace
import TrafficActions
import TrafficRules

/// The rules that may act on a response, with what its request showed: the relays ask it at the response head.
public struct ResponseRules: Sendable {
    let facts: ExchangeFacts
    let candidates: [LoadedRule]

    /// The response head with the header rules for responses that hold for it applied, and the rules that acted;
    /// nil when none did (the relay then sends the head as it came, byte for byte).
    public func atResponseHead(_ head: HTTPResponseHead, outcome: ExchangeSummary.ATSOutcome? = nil)
        -> (head: HTTPResponseHead, applied: [AppliedRule])?
    {
        var facts = facts
        facts.point = .response
        facts.status = head.status
        facts.responseHeaders = head.headers.map { ($0.name, $0.value) }
        facts.outcome = outcome
        var modifications: [(HeaderModification, LoadedRule)] = []
        for loaded in candidates where loaded.rule.applies(to: facts) {
            if case .modifyHeaders(let modification) = loaded.action, modification.direction != .requests {
                modifications.append((modification, loaded))
            }
        }
        guard !modifications.isEmpty else { return nil }
        let change = HeaderModification.apply(modifications.map(\.0), to: head)
        let applied = modifications.map { modification, loaded in
            AppliedRule(
                id: loaded.id, action: "modify-headers", point: "response-head",
                note: modification.value.isEmpty ? "removed \(modification.name)" : "set \(modification.name)")
        }
        return (change.changed, applied)
    }
}
