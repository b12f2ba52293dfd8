import HTTP1Core
import HTTP2Core
import ProxyTrace
import RuleStage

/// What the rules stage did to one exchange and what it still has to do, carried by the exchange's relay from the
/// request head to the exchange's record. A class: the four relays keep one optional reference per exchange, so an
/// exchange no rule touched grows by a nil pointer and nothing else.
final class ExchangeRules {
    /// The rules that acted, in order (the record's `rules`).
    var applied: [AppliedRule]
    /// The rules to ask at the response's head.
    let response: ResponseRules?
    /// The body rules that hold for the request (`holdRequestBody`).
    let requestEdits: BodyEdits?
    /// How much of a response body a body rule may hold (`HeldBody`).
    let bodyLimit: Int
    /// The breakpoint rule that holds the request before it goes upstream (SessionContext+Breakpoints).
    let breakpoint: String?
    /// The captured exchange this request replays (its marker field, `ReplayMarker`), for the record.
    var replayOf: Int64?

    init(
        applied: [AppliedRule], response: ResponseRules?, requestEdits: BodyEdits? = nil,
        bodyLimit: Int = BodyEdits.limit, breakpoint: String? = nil
    ) {
        self.breakpoint = breakpoint
        self.applied = applied
        self.response = response
        self.requestEdits = requestEdits
        self.bodyLimit = bodyLimit
    }

    /// The response head the client gets, when a rule changes it (nil otherwise: the head goes as it came).
    func editResponse(_ head: HTTPResponseHead, outcome: ExchangeSummary.ATSOutcome) -> HTTPResponseHead? {
        guard let response, let (changed, applied) = response.atResponseHead(head, outcome: outcome) else {
            return nil
        }
        record(applied)
        return changed
    }

    /// Adds rules that acted; a rule that already acted on the request (a header rule for both) is listed once,
    /// with both points (a breakpoint that held both request and response, with both notes).
    func record(_ more: [AppliedRule]) {
        for rule in more {
            if let i = applied.firstIndex(where: { $0.id == rule.id }) {
                guard !applied[i].point.contains(rule.point) else { continue }
                applied[i].point += ", " + rule.point
                if rule.action == "breakpoint", let note = rule.note {
                    applied[i].note = applied[i].note.map { $0 + "; " + note } ?? note
                }
            } else {
                applied.append(rule)
            }
        }
    }

    /// `editResponse` on an HTTP/2 response's fields (pseudo-fields first, names lowercase).
    func editResponse(_ fields: [H2Header], outcome: ExchangeSummary.ATSOutcome) -> [H2Header]? {
        guard response != nil, let head = HTTPResponseHead(h2Response: fields),
            let changed = editResponse(head, outcome: outcome)
        else { return nil }
        return Self.h2Fields(changed)
    }
}
