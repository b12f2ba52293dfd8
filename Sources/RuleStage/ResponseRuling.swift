import FilterCore
import HTTP1Core
import ProxyTrace
import TrafficActions
import TrafficRules

/// The rules that may act on a response, with what its request showed: the relays ask it at the response head.
public struct ResponseRules: Sendable {
    let facts: ExchangeFacts
    let candidates: [LoadedRule]
    /// The rules that may rewrite the response's body (`bodyEdits`).
    let bodyCandidates: [LoadedRule]

    init(facts: ExchangeFacts, candidates: [LoadedRule], bodyCandidates: [LoadedRule] = []) {
        self.facts = facts
        self.candidates = candidates
        self.bodyCandidates = bodyCandidates
        mayBreak = candidates.contains {
            if case .breakpoint = $0.action { true } else { false }
        }
    }

    /// Whether a breakpoint rule may hold some response of this request: when not, the relays never ask `breakpoint`.
    public let mayBreak: Bool

    /// Whether a body rule may hold for some response of this request: when not, the relays never ask `bodyEdits`.
    public var mayEditBody: Bool { !bodyCandidates.isEmpty }

    /// The body rules that hold for a response with this head (the head the client is to get), nil when none does:
    /// the relay then streams the body as it comes. When some do, the relay holds the body whole and applies them at
    /// its end.
    public func bodyEdits(at head: HTTPResponseHead, outcome: ExchangeSummary.ATSOutcome? = nil) -> BodyEdits? {
        guard !bodyCandidates.isEmpty else { return nil }
        let facts = responseFacts(head, outcome: outcome)
        var rules: [BodyEdits.Rule] = []
        for loaded in bodyCandidates where loaded.rule.applies(to: facts) {
            if case .modifyBody(let modification) = loaded.action { rules.append(.init(id: loaded.id, modification: modification)) }
        }
        return rules.isEmpty ? nil : BodyEdits(rules: rules, point: "response-body")
    }

    private func responseFacts(_ head: HTTPResponseHead, outcome: ExchangeSummary.ATSOutcome?) -> ExchangeFacts {
        var facts = facts
        facts.point = .response
        facts.status = head.status
        facts.outcome = outcome
        return facts
    }

    /// The breakpoint rule (its id) that holds a response with this head before it reaches the client, if any: the
    /// relay then holds the response whole (HeldBody) and hands it to the session as a hold at its end.
    public func breakpoint(at head: HTTPResponseHead, outcome: ExchangeSummary.ATSOutcome? = nil) -> String? {
        guard mayBreak else { return nil }
        let facts = responseFacts(head, outcome: outcome)
        for loaded in candidates where loaded.rule.applies(to: facts) {
            if case .breakpoint = loaded.action { return loaded.id }
        }
        return nil
    }

    /// The response head with the header rules for responses that hold for it applied, and the rules that acted;
    /// nil when none did (the relay then sends the head as it came, byte for byte).
    public func atResponseHead(_ head: HTTPResponseHead, outcome: ExchangeSummary.ATSOutcome? = nil)
        -> (head: HTTPResponseHead, applied: [AppliedRule])?
    {
        guard !candidates.isEmpty else { return nil }
        let facts = responseFacts(head, outcome: outcome)
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

/// The body rules that hold for one exchange's request or response, in rule order: what the relay applies to the
/// body it held whole.
public struct BodyEdits: Sendable {
    struct Rule: Sendable {
        let id: String
        let modification: BodyModification
    }

    let rules: [Rule]
    /// `request-body` or `response-body`, for the marks.
    let point: String

    /// How much body the relay holds for them by default; past it, the body goes on unchanged (`leftAlone(over:)`).
    public static let limit = BodyModification.defaultLimit

    /// The head and body to send, and the rules' marks (how many matches were replaced, or why the body was left
    /// alone; none when nothing matched). The head's Content-Length, if it has one, follows the new body.
    public func apply(to head: HTTPResponseHead, body: [UInt8], limit: Int = limit)
        -> (head: HTTPResponseHead, body: [UInt8], applied: [AppliedRule])
    {
        let change = BodyModification.apply(rules.map(\.modification), to: head, body: body, limit: limit)
        return (change.changed, change.body, marks(change, from: body))
    }

    /// `apply` for a request.
    public func apply(to head: HTTPRequestHead, body: [UInt8], limit: Int = limit)
        -> (head: HTTPRequestHead, body: [UInt8], applied: [AppliedRule])
    {
        let change = BodyModification.apply(rules.map(\.modification), to: head, body: body, limit: limit)
        return (change.changed, change.body, marks(change, from: body))
    }

    /// The marks for a body the relay could not hold whole: it went on unchanged.
    public func leftAlone(over limit: Int = limit) -> [AppliedRule] {
        marks("modify body: the body is over \(limit) bytes; left unchanged")
    }

    private func marks<Head>(_ change: BodyModification.Change<Head>, from body: [UInt8]) -> [AppliedRule] {
        if !change.notices.isEmpty { return marks(change.notices.map(\.message).joined(separator: "; ")) }
        if change.replacements > 0 {
            let n = change.replacements
            return marks("\(n) replacement\(n == 1 ? "" : "s"), \(body.count) → \(change.body.count) bytes")
        }
        // Nothing matched: the rule did not act (as a header rule that changed nothing), and the record says nothing.
        return []
    }

    private func marks(_ note: String) -> [AppliedRule] {
        rules.map { AppliedRule(id: $0.id, action: "modify-body", point: point, note: note) }
    }
}
