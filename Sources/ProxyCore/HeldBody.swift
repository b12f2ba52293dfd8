import HTTP1Core
import HTTP2Core
import ProxyTrace
import RuleStage

// Theory of operation:
//
// A body rule (`--modify-body`, `modify-body:request|:response`) needs the whole body: a regex may span any two
// pieces, and gzip's trailer comes last. The four relays share this one holder, for responses (`HeldResponse`) and
// requests (`HeldRequest`):
//
// 1. At the head the relay asks `ExchangeRules.holdBody(for:)` (a response) or `holdRequestBody(for:)` (a request);
//    nil (no body rule, or none that holds for this exchange) leaves everything as it was: the head and body stream
//    on at no further cost. Otherwise the relay sends nothing on yet and keeps the `HeldBody`.
// 2. Each body piece is `append`ed. The relay still credits the sender (h2 WINDOW_UPDATE) for what it holds, so it
//    keeps sending; the memory is bounded by `limit` instead of by the receiver's reading.
// 3. Past `limit`, the relay takes `spill()`: the head and the bytes held go on unchanged, the rest streams as usual,
//    and the rules' marks say the body was left alone.
// 4. At the body's end (END_STREAM, the HTTP/1 end, trailers), `release()` applies the edits and gives the head to
//    send (its Content-Length set to the new length if it had one; else the relay frames the body its own way:
//    chunked or close-delimited for HTTP/1 clients, DATA frames for h2) and the body.
// 5. A response that fails while held was never begun towards the client: the relay answers it as one that failed
//    before its head (a 502), not as a cut-off body.
// 6. A held request's head waits too, so an `Expect: 100-continue` would never be answered by the upstream: the
//    relay answers it itself and the head goes on without it.

/// A head a body rule can edit with its body.
protocol HeldHead: Equatable {
    static func edit(_ edits: BodyEdits, _ head: Self, body: [UInt8], limit: Int)
        -> (head: Self, body: [UInt8], applied: [AppliedRule])
}

extension HTTPResponseHead: HeldHead {
    static func edit(_ edits: BodyEdits, _ head: Self, body: [UInt8], limit: Int)
        -> (head: Self, body: [UInt8], applied: [AppliedRule])
    { edits.apply(to: head, body: body, limit: limit) }
}

extension HTTPRequestHead: HeldHead {
    static func edit(_ edits: BodyEdits, _ head: Self, body: [UInt8], limit: Int)
        -> (head: Self, body: [UInt8], applied: [AppliedRule])
    { edits.apply(to: head, body: body, limit: limit) }
}

typealias HeldResponse = HeldBody<HTTPResponseHead>
typealias HeldRequest = HeldBody<HTTPRequestHead>

/// A body held whole until its end for the body rules, with its head (theory of operation above).
final class HeldBody<Head: HeldHead> {
    /// The head to send (the header rules applied, the proxy's annotation not yet added).
    let head: Head
    let limit: Int
    /// nil when only a breakpoint holds the body.
    private let edits: BodyEdits?
    private let rules: ExchangeRules
    /// The breakpoint rule that holds the response (after the edits, at the body's end), if any.
    let breakpoint: String?
    /// The body so far, as received.
    private(set) var bytes: [UInt8] = []

    init(head: Head, edits: BodyEdits?, rules: ExchangeRules, limit: Int, breakpoint: String? = nil) {
        self.head = head
        self.edits = edits
        self.rules = rules
        self.limit = limit
        self.breakpoint = breakpoint
    }

    /// Holds one more piece; false when the body is now over `limit` and should be `spill`ed.
    func append(_ piece: some Collection<UInt8>) -> Bool {
        bytes.append(contentsOf: piece)
        return bytes.count <= limit
    }

    /// Gives up holding: the bytes held, to send after `head` unchanged; the rules are marked as having left it.
    func spill() -> [UInt8] {
        if let edits { rules.record(edits.leftAlone(over: limit)) }
        if let breakpoint {
            rules.record([
                AppliedRule(
                    id: breakpoint, action: "breakpoint", point: "response-head",
                    note: "the response body is over \(limit) bytes: not held, went on unchanged")
            ])
        }
        defer { bytes = [] }
        return bytes
    }

    /// The body ended: the head and body to send, the edits applied and the rules' marks recorded.
    func release() -> (head: Head, body: [UInt8]) {
        guard let edits else {
            defer { bytes = [] }
            return (head, bytes)
        }
        let result = Head.edit(edits, head, body: bytes, limit: limit)
        bytes = []
        rules.record(result.applied)
        return (result.head, result.body)
    }
}

extension ExchangeRules {
    /// A holder for this response's body when a body rule holds for it (`head`: what the client is to get, after
    /// the header rules); nil otherwise, and at once when no body rule was loaded for the request.
    /// A response breakpoint (`ResponseRules.breakpoint`) holds the same way, its edits (if any) applied first.
    func holdBody(for head: HTTPResponseHead, outcome: ExchangeSummary.ATSOutcome) -> HeldResponse? {
        guard let response, response.mayEditBody || response.mayBreak else { return nil }
        let edits = response.bodyEdits(at: head, outcome: outcome)
        let breakpoint = response.breakpoint(at: head, outcome: outcome)
        guard edits != nil || breakpoint != nil else { return nil }
        return HeldBody(head: head, edits: edits, rules: self, limit: bodyLimit, breakpoint: breakpoint)
    }

    /// Whether a response breakpoint may hold a response of this exchange (a bodiless one is held too).
    var mayBreakResponse: Bool { response?.mayBreak == true }

    /// `holdBody` for an HTTP/2 response's fields.
    func holdBody(for fields: [H2Header], outcome: ExchangeSummary.ATSOutcome) -> HeldResponse? {
        guard let response, response.mayEditBody || response.mayBreak, let head = HTTPResponseHead(h2Response: fields)
        else { return nil }
        return holdBody(for: head, outcome: outcome)
    }

    /// A holder for the request's body when a body rule holds for the request (`head`: the one to send upstream,
    /// without `Expect: 100-continue`, which the relay answers itself); nil otherwise.
    func holdRequestBody(for head: HTTPRequestHead) -> HeldRequest? {
        guard let requestEdits else { return nil }
        var head = head
        head.headers.remove(name: "Expect")
        return HeldBody(head: head, edits: requestEdits, rules: self, limit: bodyLimit)
    }

    /// An HTTP/2 response's fields for a head (pseudo-fields first, names lowercase).
    static func h2Fields(_ head: HTTPResponseHead) -> [H2Header] {
        [H2Header(":status", String(head.status))] + head.headers.map { H2Header($0.name.lowercased(), $0.value) }
    }
}

extension HTTP1BodyFraming {
    /// Whether a message so framed can have a body for a body rule to hold.
    var mayCarryBody: Bool {
        switch self {
        case .chunked, .untilClose: true
        case .contentLength(let length): length > 0
        case .none, .switchProtocols: false
        }
    }
}

/// A response a breakpoint holds whole at its end, for the session to list as a hold (`RelayOutput.responseHolds`):
/// the relay sends it on when the session hands it the release (`ExchangeRelay.releaseResponse`).
struct ResponseToHold {
    /// The exchange in its relay: the HTTP/1 exchange's number, the h2 client stream's id.
    let id: Int
    let rule: String
    let rules: ExchangeRules
    let method: String
    let url: String
    /// What the client is to get: the header and body rules applied, the proxy's annotation not yet added.
    let head: HTTPResponseHead
    let body: [UInt8]
}

extension HoldRelease {
    /// A held response as released: nil to abort; otherwise its head and body (as held when nothing was edited),
    /// and whether a person edited them. An edited head loses its framing fields, and gets a Content-Length that
    /// fits the body unless it can carry none (1xx, 204, 304, a HEAD's answer: then it is kept as given).
    func response(_ head: HTTPResponseHead, _ body: [UInt8], method: String) -> (
        head: HTTPResponseHead, body: [UInt8], edited: Bool
    )? {
        let edited: (HTTPResponseHead?, [UInt8]?)
        switch self {
        case .abort: return nil
        case .execute(_, _, let response, let responseBody): edited = (response, responseBody)
        case .answer(let response, let responseBody): edited = (response, responseBody)
        }
        guard edited.0 != nil || edited.1 != nil else { return (head, body, false) }
        var sent = edited.0 ?? head
        let newBody = edited.1 ?? body
        if sent == head, newBody == body { return (head, body, false) }
        if method == "HEAD" || sent.status == 204 || sent.status == 304 || sent.status < 200 { return (sent, [], true) }
        sent.headers.remove(name: "Content-Length")
        sent.headers.remove(name: "Transfer-Encoding")
        sent.headers.add(name: "Content-Length", value: String(newBody.count))
        return (sent, newBody, true)
    }
}
