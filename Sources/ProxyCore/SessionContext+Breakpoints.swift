import Foundation
import HTTP1Core
import ProxyTrace

// Theory of operation: breakpoints on request heads (issue 34).
//
// A breakpoint rule that holds for a request (RuleStage: `RequestRuling.breakpoint`, carried in the decision's
// `ExchangeRules.breakpoint`) stops the layer's decision seam from resolving it: the relay keeps the request
// undecided (an h1 connection's later bytes wait behind it, an h2 connection's other streams go on), and while it
// is undecided no client deadline runs for it. The session instead
//
//   1. keeps the decision the layer and the rules made (`BreakpointHold`) under a fresh hold id,
//   2. asks the adapter to list it in the hold registry (`.hold(HeldExchange)`), and
//   3. starts the hold's timer (`ProxyTimer.hold(id)`, `--breakpoint-timeout`).
//
// The release comes back as an event (`.holdReleased`, posted on this session's loop by the registry's `deliver`),
// or the timer fires first; whichever is first takes the held request, the other finds nothing and is dropped:
//
//   execute  the decision, with the edited head if one came, resolved through the layer (`resumeHeld`)
//   answer   the person's response instead of the upstream's (Content-Length made right)
//   abort    the client's connection is reset (the app sees -1005), and a record says so
//   timeout  the decision unchanged, with a notice; the registry's entry is taken off (`.unhold`)
//
// Each way, the exchange's record gets an `AppliedRule` with action `breakpoint` saying how long it was held and how
// it was released. The request body is not held with the head: the relay holds it behind the undecided head and
// sends it as it came once released, so a release edits the head only (`requestBody` is ignored for now).
//
// Breakpoints on responses: at the response head the relay asks the rules (`ExchangeRules.holdBody`, with the body
// rules) and, when a breakpoint holds, keeps head and body whole as a body rule does (HeldBody: h2 bodies credited at
// once, bounded by the body limit; past it the response goes on unchanged with a note). At the body's end, the body
// rules applied, the relay reports it (`RelayOutput.responseHolds`) and waits: an HTTP/1 connection waits whole, an
// h2 connection's other streams go on. The session lists it (`.hold`, phase `response`) with its timer as above,
// and hands the release to the relay (`ExchangeRelay.releaseResponse`): execute sends it as held or edited (framed
// by a Content-Length that fits), abort resets the client's stream (h2) or connection (HTTP/1), a timeout sends it
// unchanged with a notice.

/// A response a breakpoint holds, waiting for a person.
struct ResponseHold {
    let held: ResponseToHold
    /// The relay holding it: a release for a relay that was replaced since is dropped.
    let relay: AnyObject
    let heldAt: Double
}

/// A request a breakpoint holds: what the layer and the rules decided for it, waiting for a person.
struct BreakpointHold {
    /// The exchange's id in its relay (`DecisionRequest.id`).
    let requestID: Int
    /// The relay holding it undecided: a release for a relay that was replaced since is dropped.
    let relay: AnyObject
    let decision: RequestDecision
    let rules: ExchangeRules
    let rule: String
    let heldAt: Double
}

extension SessionContext {
    /// Holds the request when a breakpoint holds for it (the decision carries the rule): true when held, and the
    /// caller leaves it undecided. Without rules, one nil check.
    @inline(__always)
    func holdsAtBreakpoint(_ decision: RequestDecision, requestID: Int, relay: AnyObject) -> Bool {
        if env.rules == nil { return false }
        return holdRequest(decision, requestID: requestID, relay: relay)
    }

    private func holdRequest(_ decision: RequestDecision, requestID: Int, relay: AnyObject) -> Bool {
        guard case .forward(let head, let url, _, _, _, _, let rules?) = decision, let rule = rules.breakpoint else {
            return false
        }
        let id = env.holds.makeID()
        let heldAt = now()
        let limit = env.breakpointTimeout.components
        let seconds = Double(limit.seconds) + Double(limit.attoseconds) / 1e18
        breakpointHolds[id] = BreakpointHold(
            requestID: requestID, relay: relay, decision: decision, rules: rules, rule: rule, heldAt: heldAt)
        commands.append(
            .hold(
                HeldExchange(
                    id: id, connectionID: self.id, phase: .request, url: url, request: head, breakpoint: rule,
                    heldAt: heldAt, deadline: heldAt + seconds)))
        commands.append(.startTimer(.hold(id), after: env.breakpointTimeout))
        return true
    }

    /// Lists the responses a relay step holds (`RelayOutput.responseHolds`) as holds, each with its timer.
    func holdResponses(_ responses: [ResponseToHold], relay: AnyObject?) {
        guard let relay else { return }
        let limit = env.breakpointTimeout.components
        let seconds = Double(limit.seconds) + Double(limit.attoseconds) / 1e18
        for response in responses {
            let id = env.holds.makeID()
            let heldAt = now()
            responseHolds[id] = ResponseHold(held: response, relay: relay, heldAt: heldAt)
            let request = HTTPRequestHead(method: response.method, target: response.url)
            commands.append(
                .hold(
                    HeldExchange(
                        id: id, connectionID: self.id, phase: .response, url: response.url, request: request,
                        response: response.head, responseBody: response.body, breakpoint: response.rule,
                        heldAt: heldAt, deadline: heldAt + seconds)))
            commands.append(.startTimer(.hold(id), after: env.breakpointTimeout))
        }
    }

    /// A held response's release: recorded on the exchange, then handed to its relay.
    private func releaseResponseHold(_ id: UInt64, _ hold: ResponseHold, _ release: HoldRelease?) {
        let held = hold.held
        let seconds = String(format: "%.1f", max(0, now() - hold.heldAt))
        let note: String
        switch release {
        case nil:
            commands.append(.unhold(id))
            note = "response held \(seconds) s with no release: went on unchanged"
            notice(
                "breakpoint \(held.rule): the response to \(held.method) \(held.url) was held \(seconds) s with no "
                    + "release: it goes on unchanged")
        case .abort?:
            note = "response held \(seconds) s, aborted"
        case let release?:
            let edited = release.response(held.head, held.body, method: held.method)?.edited ?? false
            note = "response held \(seconds) s, executed" + (edited ? " edited" : "")
        }
        held.rules.record([AppliedRule(id: held.rule, action: "breakpoint", point: "response-head", note: note)])
        switch phase {
        case .intercepting(let i): i.releaseResponse(self, hold, release)
        case .plain(let p): p.releaseResponse(self, hold, release)
        case .front, .sniffing, .tunnel, .upgraded, .done: break
        }
    }

    /// The hold `id` ends: released by a person, or (`release` nil) timed out. A hold already ended, or whose
    /// client went, is dropped.
    func releaseHold(_ id: UInt64, _ release: HoldRelease?) {
        if let hold = responseHolds.removeValue(forKey: id) { return releaseResponseHold(id, hold, release) }
        guard let held = breakpointHolds.removeValue(forKey: id) else { return }
        let seconds = String(format: "%.1f", max(0, now() - held.heldAt))
        guard case .forward(let head, let url, let upstream, let annotation, let outcome, let codes, _) = held.decision
        else { return }
        let decision: RequestDecision
        let note: String
        switch release {
        case nil:
            commands.append(.unhold(id))
            note = "timed out after \(seconds) s, went on unchanged"
            notice("breakpoint \(held.rule): \(head.method) \(url) was held \(seconds) s with no release: it goes on unchanged")
            decision = held.decision
        case .execute(let edited, let body, _, _):
            var sent = edited.map { Self.keepingFraming(of: head, $0) } ?? head
            if sent.method == "CONNECT" { sent = head }
            note = (sent == head ? "held \(seconds) s, executed" : "held \(seconds) s, executed edited")
                + (body == nil ? "" : "; the body edit was not applied (the body is not held yet)")
            decision = .forward(
                head: sent, url: url, upstream: upstream, annotation: annotation, outcome: outcome,
                codes: codes, rules: held.rules)
        case .answer(let response, let body):
            note = "held \(seconds) s, answered \(response.status)"
            let sent = Self.answerFraming(response, body: body, method: head.method)
            decision = .answer(
                head: sent.head, body: sent.body, url: url, outcome: outcome, codes: codes, rules: held.rules)
        case .abort:
            held.rules.record([
                AppliedRule(id: held.rule, action: "breakpoint", point: "request-head", note: "held \(seconds) s, aborted")
            ])
            guard !isDone else { return }
            var record = ExchangeSummary(
                method: head.method, url: url, status: nil, httpVersion: "HTTP/1.1", outcome: outcome, errors: codes,
                requestBytes: 0, responseBytes: 0, durationMilliseconds: (now() - held.heldAt) * 1000,
                interruption: "aborted at a breakpoint: the connection was reset")
            record.rules = held.rules.applied
            logExchange(record)
            closeAll(tlsClose: false, reset: true)
            return
        }
        held.rules.record([AppliedRule(id: held.rule, action: "breakpoint", point: "request-head", note: note)])
        switch phase {
        case .intercepting(let i): i.resumeHeld(self, held, decision)
        case .plain(let p): p.resumeHeld(self, held, decision)
        case .front, .sniffing, .tunnel, .upgraded, .done: break
        }
    }

    /// An edited request head framed as the held one: the body is not held, so it goes upstream as the app sent
    /// it, and the edited head keeps the original's Content-Length or Transfer-Encoding (an editor drops them).
    static func keepingFraming(of original: HTTPRequestHead, _ edited: HTTPRequestHead) -> HTTPRequestHead {
        func framing(_ head: HTTPRequestHead) -> [HTTPHeaders.Field] {
            head.headers.fields.filter {
                $0.name.lowercased() == "content-length" || $0.name.lowercased() == "transfer-encoding"
            }
        }
        let kept = framing(original)
        if framing(edited) == kept { return edited }
        var edited = edited
        edited.headers.remove(name: "Content-Length")
        edited.headers.remove(name: "Transfer-Encoding")
        for field in kept { edited.headers.add(name: field.name, value: field.value) }
        return edited
    }

    /// A person's answer as it goes to the client: its framing fields replaced by a Content-Length that fits the
    /// body (none for a HEAD's, a 204's or a 304's, which carry no body).
    static func answerFraming(_ head: HTTPResponseHead, body: [UInt8], method: String) -> (
        head: HTTPResponseHead, body: [UInt8]
    ) {
        var head = head
        head.headers.remove(name: "Content-Length")
        head.headers.remove(name: "Transfer-Encoding")
        let bodiless = method == "HEAD" || head.status == 204 || head.status == 304 || head.status < 200
        // A HEAD's answer says how long the body would be.
        if head.status != 204, head.status != 304, head.status >= 200 {
            head.headers.add(name: "Content-Length", value: String(body.count))
        }
        return (head, bodiless ? [] : body)
    }

    /// The holds this session still has, taken off the registry as it ends (the adapter also removes every hold
    /// it listed for a connection that closed).
    func dropHolds() {
        for id in breakpointHolds.keys.sorted() { commands.append(.unhold(id)) }
        breakpointHolds.removeAll()
        for id in responseHolds.keys.sorted() { commands.append(.unhold(id)) }
        responseHolds.removeAll()
    }
}
