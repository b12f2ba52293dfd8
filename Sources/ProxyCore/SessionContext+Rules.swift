import HTTP1Core
import ProxyTrace
import RuleStage

// The rules stage's request-head point, where the layers' decisions pass (InterceptLayer.apply and PlainLayer.apply
// call `ruled` on every decision before the relay gets it): so the four relays, and both ways a request reaches
// the proxy, share one place where rules act. The response-head point runs inside the relays, through the
// `ExchangeRules` a decision carries (ExchangeRules.editResponse). The connection point runs where a connection's
// target is known (SessionContext+ConnectionRules).

extension SessionContext {
    /// The rules in force (one atomic load when they did not change since the last look); nil when there are none.
    func currentRules() -> RuleSnapshot? {
        guard let book = env.rules else { return nil }
        let generation = book.generation
        if let snapshot = ruleSnapshot, snapshot.generation == generation { return snapshot.isEmpty ? nil : snapshot }
        let snapshot = book.snapshot()
        ruleSnapshot = snapshot
        return snapshot.isEmpty ? nil : snapshot
    }

    /// The layer's decision on a request, as the rules in force change it: answered locally (map local, answer, a
    /// status fault), sent on with a changed head, or carrying the rules its response will meet. nil when a rule
    /// blocks the request: the client's connection is then reset (the app sees -1005) and the request logged.
    @inline(__always)
    func ruled(_ decision: consuming RequestDecision, request: HTTPRequestHead) -> RequestDecision? {
        if acceptsReplayMarker, let replayOf = ReplayMarker.value(in: request.headers) {
            return markedReplay(decision, request: request, replayOf: replayOf)
        }
        if env.rules == nil { return decision }
        return applyRequestRules(decision, request: request)
    }

    /// A replay the proxy (or `atsproxy replay`) sent through itself: the marker is taken off the head before the
    /// rules see it and before it goes upstream, and the exchange's record names the original (`replayOf`).
    private func markedReplay(_ decision: consuming RequestDecision, request: HTTPRequestHead, replayOf: Int64)
        -> RequestDecision?
    {
        var request = request
        request.headers.remove(name: ReplayMarker.field)
        var unmarked: RequestDecision = decision
        if case .forward(var head, let url, let upstream, let annotation, let outcome, let codes, let rules) = unmarked {
            head.headers.remove(name: ReplayMarker.field)
            unmarked = .forward(
                head: head, url: url, upstream: upstream, annotation: annotation, outcome: outcome, codes: codes,
                rules: rules)
        }
        let ruledDecision = env.rules == nil ? unmarked : applyRequestRules(unmarked, request: request)
        guard let ruledDecision else { return nil }
        switch ruledDecision {
        case .forward(let head, let url, let upstream, let annotation, let outcome, let codes, let rules):
            let effects = rules ?? ExchangeRules(applied: [], response: nil)
            effects.replayOf = replayOf
            return .forward(
                head: head, url: url, upstream: upstream, annotation: annotation, outcome: outcome, codes: codes,
                rules: effects)
        case .answer(let head, let body, let url, let outcome, let codes, let rules):
            let effects = rules ?? ExchangeRules(applied: [], response: nil)
            effects.replayOf = replayOf
            return .answer(head: head, body: body, url: url, outcome: outcome, codes: codes, rules: effects)
        }
    }

    private func applyRequestRules(_ decision: consuming RequestDecision, request: HTTPRequestHead)
        -> RequestDecision?
    {
        guard let rules = currentRules() else { return decision }
        if case .answer(_, _, let url, .failed, _, _) = decision {
            // The server could not be reached: a mock still answers (an endpoint not deployed yet), with no
            // verdict, as there was no server to judge; anything else keeps the failure's answer.
            let (host, port) = Self.hostAndPort(ofURL: url)
            guard let ruling = rules.atRequestHead(request, url: url, host: host, port: port, files: env.ruleFiles),
                let answer = ruling.answer
            else { return decision }
            let effects = ExchangeRules(applied: ruling.applied, response: ruling.response)
            let head = effects.editResponse(answer.head, outcome: .notEvaluated) ?? answer.head
            return .answer(head: head, body: answer.body, url: url, outcome: .notEvaluated, codes: [], rules: effects)
        }
        // Answers the layer made itself (an ATS block, the set-up site, a refusal) are no traffic of the app's.
        guard case .forward(let head, let url, let upstream, let annotation, let outcome, let codes, _) = decision
        else { return decision }
        let (host, port) = Self.hostAndPort(ofURL: url)
        guard let ruling = rules.atRequestHead(head, url: url, host: host, port: port, files: env.ruleFiles) else {
            return decision
        }
        let effects = ExchangeRules(
            applied: ruling.applied, response: ruling.response, requestEdits: ruling.bodyEdits,
            bodyLimit: env.ruleBodyLimit, breakpoint: ruling.breakpoint)
        if let answer = ruling.answer {
            // A local answer meets the response's rules too, as mitmproxy's response hook runs for a mapped one.
            var head = effects.editResponse(answer.head, outcome: outcome) ?? answer.head
            var body = answer.body
            if !body.isEmpty, let held = effects.holdBody(for: head, outcome: outcome) {
                if held.append(body) { (head, body) = held.release() } else { _ = held.spill() }
            }
            return .answer(head: head, body: body, url: url, outcome: outcome, codes: codes, rules: effects)
        }
        if ruling.block != nil {
            var record = ExchangeSummary(
                method: head.method, url: url, status: nil, httpVersion: "HTTP/1.1", outcome: outcome, errors: codes,
                requestBytes: 0, responseBytes: 0, durationMilliseconds: 0,
                interruption: "blocked by a rule: the connection was reset")
            record.rules = ruling.applied
            logExchange(record)
            closeAll(tlsClose: false, reset: true)
            return nil
        }
        return .forward(
            head: ruling.head, url: url, upstream: upstream, annotation: annotation, outcome: outcome, codes: codes,
            rules: effects)
    }

    /// The host (lowercased, without brackets) and port of an absolute URL as the layers write it
    /// (`https://host[:port]/path`).
    static func hostAndPort(ofURL url: String) -> (host: String, port: Int) {
        let secure = url.hasPrefix("https://")
        var rest = Substring(url)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        var host = authority
        var port = secure ? 443 : 80
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":"), let p = Int(after.dropFirst()) { port = p }
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            if let p = Int(host[host.index(after: colon)...]) { port = p }
            host = host[..<colon]
        }
        return (host.lowercased(), port)
    }
}
