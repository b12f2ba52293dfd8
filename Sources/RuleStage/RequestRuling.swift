import FilterCore
import HTTP1Core
import ProxyTrace
import TrafficActions
import TrafficRules

/// What the rules decided at a request head.
public struct RequestRuling: Sendable {
    /// The head to send upstream: the request's, with the header rules for requests applied.
    public var head: HTTPRequestHead
    /// Answer locally instead of contacting the upstream (map local, answer, `fault …=status:NNN`).
    public var answer: LocalResponse?
    /// Refuse the request: the connection is reset (or, before any byte, refused).
    public var block: BlockKind?
    /// The rules to consult at the response's head (nil when none can act there).
    public var response: ResponseRules?
    /// The body rules that hold for this request: the relay holds its body whole and applies them at its end.
    public var bodyEdits: BodyEdits?
    /// The rules that acted so far, in order.
    public var applied: [AppliedRule]
    /// The breakpoint rule (its id) that holds this request before it goes upstream, if any: the session holds it
    /// until a person releases it (issue 34). Only a request that would go upstream is held.
    public var breakpoint: String? = nil
}

extension RuleSnapshot {
    /// The rules at a request head: nil when none acted and none waits for the response, so a request no rule
    /// touches costs nothing more. `url` is the absolute URL (`https://host/path`), what map local's regex and
    /// `text:` read.
    public func atRequestHead(
        _ head: HTTPRequestHead, url: String, host: String, port: Int, files: some FileReading = POSIXFileReader()
    ) -> RequestRuling? {
        guard !atRequestHead.isEmpty || !atRequestBody.isEmpty || !atResponseHead.isEmpty || !atResponseBody.isEmpty else {
            return nil
        }
        // No filter key reads a header (FilterCondition.matches): the facts leave them out, which spares every
        // request the strings of all its fields.
        let facts = ExchangeFacts(
            point: .request, host: host, port: port, method: head.method, url: url, path: head.target)
        var ruling = RequestRuling(head: head, answer: nil, block: nil, response: nil, bodyEdits: nil, applied: [])
        // Header rules first, all together (mitmproxy's remove-then-add), so an answering rule sees the new head.
        var modifications: [(HeaderModification, LoadedRule)] = []
        for loaded in atRequestHead where loaded.rule.applies(to: facts) {
            if case .modifyHeaders(let modification) = loaded.action, modification.direction != .responses {
                modifications.append((modification, loaded))
            }
        }
        if !modifications.isEmpty {
            let change = HeaderModification.apply(modifications.map(\.0), to: head)
            ruling.head = change.changed
            for (modification, loaded) in modifications {
                ruling.applied.append(
                    AppliedRule(
                        id: loaded.id, action: "modify-headers", point: "request-head",
                        note: modification.value.isEmpty ? "removed \(modification.name)" : "set \(modification.name)"))
            }
        }
        let request = LocalRequest(method: ruling.head.method, url: url, headers: ruling.head.headers)
        answering: for loaded in atRequestHead where loaded.rule.applies(to: facts) {
            switch loaded.action {
            case .mapLocal(let rule):
                guard let response = MapLocal.respond(to: request, rule: rule, files: files) else { continue }
                let shown = response.servedFile ?? rule.localPath
                let note = (["served " + shown] + response.notices.map(\.message)).joined(separator: "; ")
                ruling.answer = response
                ruling.applied.append(AppliedRule(id: loaded.id, action: "map-local", point: "request-head", note: note))
                break answering
            case .answer(let canned):
                let response = canned.response(method: ruling.head.method, files: files)
                let note = (["answered \(response.head.status)"] + response.notices.map(\.message))
                    .joined(separator: "; ")
                ruling.answer = response
                ruling.applied.append(AppliedRule(id: loaded.id, action: "answer", point: "request-head", note: note))
                break answering
            case .fault(.status(let status)):
                let text = "ATSProxy: status \(status) injected by rule \(loaded.id)\n"
                var response = LocalResponse(
                    head: HTTPResponseHead(status: status, reason: LocalResponse.reasonPhrase(status)),
                    body: ruling.head.method == "HEAD" || status == 204 || status == 304 ? [] : Array(text.utf8))
                response.head.headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
                if status != 204, status != 304 {
                    response.head.headers.add(name: "Content-Length", value: String(text.utf8.count))
                }
                ruling.answer = response
                ruling.applied.append(
                    AppliedRule(id: loaded.id, action: "fault", point: "request-head", note: "status \(status) (injected)"))
                break answering
            case .block(let kind):
                ruling.block = kind
                ruling.applied.append(
                    AppliedRule(id: loaded.id, action: "block", point: "request-head", note: "\(kind.rawValue) (injected)"))
                break answering
            default:
                continue
            }
        }
        if ruling.answer == nil, ruling.block == nil {
            for loaded in atRequestHead where loaded.rule.applies(to: facts) {
                if case .breakpoint = loaded.action {
                    ruling.breakpoint = loaded.id
                    break
                }
            }
        }
        if ruling.block == nil, !atResponseHead.isEmpty || !atResponseBody.isEmpty {
            // Only the response rules the request has not ruled out already (a rule for another host): most
            // requests then carry none, and their responses pay nothing.
            let candidates = atResponseHead.filter { $0.rule.filter?.mayMatch(facts) ?? true }
            let bodyCandidates = atResponseBody.filter { $0.rule.filter?.mayMatch(facts) ?? true }
            if !candidates.isEmpty || !bodyCandidates.isEmpty {
                ruling.response = ResponseRules(facts: facts, candidates: candidates, bodyCandidates: bodyCandidates)
            }
        }
        if ruling.answer == nil, ruling.block == nil, !atRequestBody.isEmpty {
            var rules: [BodyEdits.Rule] = []
            for loaded in atRequestBody where loaded.rule.applies(to: facts) {
                if case .modifyBody(let modification) = loaded.action {
                    rules.append(.init(id: loaded.id, modification: modification))
                }
            }
            if !rules.isEmpty { ruling.bodyEdits = BodyEdits(rules: rules, point: "request-body") }
        }
        return ruling.applied.isEmpty && ruling.response == nil && ruling.bodyEdits == nil && ruling.breakpoint == nil
            ? nil : ruling
    }
}
