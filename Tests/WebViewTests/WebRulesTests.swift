import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace
import Synchronization
import Testing
import TestSupport

@testable import WebView

/// A rule book stand-in: what the rules API lists, switches and makes, and what it was asked.
final class FakeRuleControl: Sendable {
    let rules = Mutex<[WebRuleInfo]>([
        WebRuleInfo(
            id: "mock", text: "[mock] map-local |^https://api\\.test/v1/1$|m.json", action: "map-local",
            points: ["request-head"], enabled: true, origin: "option"),
        WebRuleInfo(
            id: "rules.txt:3", text: "fault slow.test=timeout", action: "fault", points: ["connection"], enabled: true,
            origin: "file"),
    ])
    let made = Mutex<[(WebRuleRequest, Int64)]>([])

    var control: WebRuleControl {
        WebRuleControl(
            list: { self.rules.withLock { $0 } },
            setEnabled: { id, on in
                self.rules.withLock { rules in
                    guard let i = rules.firstIndex(where: { $0.id == id }) else { return false }
                    rules[i].enabled = on
                    return true
                }
            },
            create: { request, exchange in
                self.made.withLock { $0.append((request, exchange.id)) }
                if case .mapLocal = request, exchange.record.detail?.responseBody?.isTruncated == true {
                    return .failure(WebRuleError("the body was cut"))
                }
                let rule = WebRuleInfo(
                    id: "web-1", text: "[web-1] …", action: "fault", points: ["connection"], enabled: true,
                    origin: "runtime")
                self.rules.withLock { $0.insert(rule, at: 0) }
                return .success(rule)
            },
            remove: { id in
                self.rules.withLock { rules in
                    let before = rules.count
                    rules.removeAll { $0.id == id && $0.origin == "runtime" }
                    return rules.count != before
                }
            },
            faultKinds: ["expired", "tls1.0", "timeout"], throttleProfiles: ["3G", "Edge"])
    }
}

@Suite("Web view API: rules")
struct WebRulesTests {
    let path: String
    let fake = FakeRuleControl()
    let router: WebRouter

    static let applied = [
        AppliedRule(id: "mock", action: "map-local", point: "request-head", note: "served m.json"),
    ]

    /// A capture of two exchanges: 1 answered by the rule `mock` (map local), 2 relayed and untouched.
    init() throws {
        path = try TestScratch.folder("webview-rules").appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(
            path: path, run: CaptureRunInfo(started: 1_700_000_000, atsproxyVersion: "test", bodyLimit: 4096, settings: [:]))
        var items: [CaptureItem] = []
        for i in 1...2 {
            var e = ExchangeSummary(
                method: "GET", url: "https://api.test/v1/\(i)", status: 200, httpVersion: "HTTP/1.1", outcome: .allowed,
                errors: [], requestBytes: 0, responseBytes: 9, durationMilliseconds: 1)
            e.connection = ConnectionRecord(connectionID: UInt64(i))
            e.action = .relayed
            e.detail = ExchangeDetail(
                request: HTTPRequestHead(method: "GET", target: "/v1/\(i)", headers: [("Host", "api.test")]),
                forwardedRequest: i == 2
                    ? HTTPRequestHead(method: "GET", target: "/v1/\(i)", headers: [("Host", "api.test"), ("X-A", "1")])
                    : nil,
                clientResponse: HTTPResponseHead(status: 200, headers: [("Content-Type", "application/json")]),
                timings: ExchangeTimings(started: 1_700_000_000 + Double(i), ended: 1_700_000_000.5 + Double(i)),
                responseBody: CapturedBody(bytes: Array("{\"n\":\(i)}".utf8), totalBytes: 7))
            if i == 1 { e.rules = Self.applied }
            items.append(.exchange(e))
        }
        try writer.write(items)
        try writer.close(ended: 1_700_000_010)
        var context = WebRouterTests.context(path)
        context.extensions.rules = fake.control
        router = WebRouter(reader: try CaptureReader(path: path), context: context)
    }

    /// Routes a request and returns its status and JSON body.
    func call(
        _ method: String, _ target: String, json: String? = nil, headers: [(String, String)] = [],
        on router: WebRouter? = nil
    ) throws -> (status: Int, json: Any?) {
        var fields = HTTPHeaders([("Host", "127.0.0.1:8081")])
        if json != nil { fields.add(name: "Content-Type", value: "application/json") }
        for (name, value) in headers { fields.add(name: name, value: value) }
        var request = try #require(WebRequest(head: HTTPRequestHead(method: method, target: target, headers: fields)))
        request.body = Array((json ?? "").utf8)
        guard case .respond(let response) = (router ?? self.router).route(request) else {
            Issue.record("\(target) started a stream")
            return (0, nil)
        }
        let body = response.body.isEmpty ? nil : try? JSONSerialization.jsonObject(with: Data(response.body))
        return (response.status, body)
    }

    func enabled() -> [String: Bool] {
        Dictionary(uniqueKeysWithValues: fake.rules.withLock { $0.map { ($0.id, $0.enabled) } })
    }

    @Test("The list marks an exchange a rule touched with its rules; the detail has them and both heads")
    func rowsCarryRules() throws {
        let list = try call("GET", "/api/exchanges")
        let rows = try #require((list.json as? [String: Any])?["exchanges"] as? [[String: Any]])
        #expect(rows.map { $0["id"] as? Int } == [2, 1])
        #expect(rows[0]["rules"] == nil, "an untouched exchange has no rules field")
        let rules = try #require(rows[1]["rules"] as? [[String: String]])
        #expect(rules == [["id": "mock", "action": "map-local", "point": "request-head", "note": "served m.json"]])

        let detail = try #require(try call("GET", "/api/exchanges/1").json as? [String: Any])
        #expect(((detail["exchange"] as? [String: Any])?["rules"] as? [[String: String]])?.first?["id"] == "mock")
        let changed = try #require(try call("GET", "/api/exchanges/2").json as? [String: Any])
        #expect((changed["request"] as? [String: Any])?["line"] as? String == "GET /v1/2 HTTP/1.1")
        #expect(((changed["forwardedRequest"] as? [String: Any])?["headers"] as? [[String]])?.last == ["X-A", "1"])
    }

    @Test("GET /api/rules lists the rules with the pickers' choices; /api/info says the panel is on")
    func listing() throws {
        let (status, json) = try call("GET", "/api/rules")
        #expect(status == 200)
        let body = try #require(json as? [String: Any])
        let rules = try #require(body["rules"] as? [[String: Any]])
        #expect(rules.map { $0["id"] as? String } == ["mock", "rules.txt:3"])
        #expect(rules[0]["text"] as? String == "[mock] map-local |^https://api\\.test/v1/1$|m.json")
        #expect(rules[0]["points"] as? [String] == ["request-head"])
        #expect(rules[0]["enabled"] as? Bool == true)
        #expect(rules[1]["origin"] as? String == "file")
        #expect(body["faultKinds"] as? [String] == ["expired", "tls1.0", "timeout"])
        #expect(body["throttleProfiles"] as? [String] == ["3G", "Edge"])
        let info = try #require(try call("GET", "/api/info").json as? [String: Any])
        #expect((info["features"] as? [String: Bool])?["rules"] == true)
    }

    @Test("A rule is switched off and on again by a same-origin JSON POST; an unknown id is 404, a bad body 400")
    func switching() throws {
        let off = try call("POST", "/api/rules/enabled", json: #"{"id": "rules.txt:3", "enabled": false}"#,
                           headers: [("Origin", "http://127.0.0.1:8081"), ("Sec-Fetch-Site", "same-origin")])
        #expect(off.status == 200)
        #expect(enabled() == ["mock": true, "rules.txt:3": false])
        let listed = try #require(((off.json as? [String: Any])?["rules"] as? [[String: Any]])?.last)
        #expect(listed["enabled"] as? Bool == false, "the answer is the list after the change")
        #expect(try call("POST", "/api/rules/enabled", json: #"{"id": "rules.txt:3", "enabled": true}"#).status == 200)
        #expect(enabled() == ["mock": true, "rules.txt:3": true])
        #expect(try call("POST", "/api/rules/enabled", json: #"{"id": "nope", "enabled": false}"#).status == 404)
        #expect(try call("POST", "/api/rules/enabled", json: #"{"id": "mock"}"#).status == 400)
        #expect(try call("POST", "/api/rules/enabled", json: "not json").status == 400)
    }

    @Test("A POST from another site is refused 403 and changes nothing: a form's body, a foreign Origin, cross-site fetch")
    func crossSiteRefused() throws {
        let body = #"{"id": "mock", "enabled": false}"#
        // A form can post text/plain or urlencoded without a preflight; never JSON.
        var form = try #require(WebRequest(head: HTTPRequestHead(
            method: "POST", target: "/api/rules/enabled",
            headers: [("Host", "127.0.0.1:8081"), ("Content-Type", "text/plain")])))
        form.body = Array(body.utf8)
        guard case .respond(let formAnswer) = router.route(form) else {
            Issue.record("a stream")
            return
        }
        #expect(formAnswer.status == 403)
        #expect(try call("POST", "/api/rules/enabled", json: body, headers: [("Origin", "http://evil.example")]).status == 403)
        #expect(try call("POST", "/api/rules/enabled", json: body, headers: [("Origin", "null")]).status == 403)
        #expect(try call("POST", "/api/rules/enabled", json: body, headers: [("Sec-Fetch-Site", "cross-site")]).status == 403)
        #expect(try call("POST", "/api/rules/enabled", json: body, headers: [("Sec-Fetch-Site", "same-site")]).status == 403)
        #expect(try call("POST", "/api/rules", json: #"{"exchange": 1, "kind": "map-local"}"#,
                         headers: [("Origin", "http://localhost.evil.example")]).status == 403)
        #expect(enabled() == ["mock": true, "rules.txt:3": true])
        #expect(fake.made.withLock { $0.isEmpty })
        // Other routes stay read-only; the rules routes say they take POST.
        #expect(try call("POST", "/api/exchanges", json: "{}").status == 405)
        #expect(try call("PUT", "/api/rules", json: "{}").status == 405)
    }

    @Test("Rules are made from an exchange: fault, throttle and map local reach the book with the exchange read whole")
    func making() throws {
        let fault = try call("POST", "/api/rules", json: #"{"exchange": 1, "kind": "fault", "fault": "expired"}"#)
        #expect(fault.status == 201)
        #expect((fault.json as? [String: Any])?["id"] as? String == "web-1")
        #expect(try call("POST", "/api/rules", json: #"{"exchange": 2, "kind": "throttle", "profile": "3G"}"#).status == 201)
        #expect(try call("POST", "/api/rules", json: #"{"exchange": 2, "kind": "map-local"}"#).status == 201)
        let made = fake.made.withLock { $0 }
        #expect(made.map(\.0) == [.fault(kind: "expired"), .throttle(profile: "3G"), .mapLocal])
        #expect(made.map(\.1) == [1, 2, 2])
        #expect(try call("POST", "/api/rules", json: #"{"exchange": 99, "kind": "map-local"}"#).status == 404)
        #expect(try call("POST", "/api/rules", json: #"{"exchange": 1, "kind": "delay"}"#).status == 400)
        #expect(try call("POST", "/api/rules", json: #"{"exchange": 1, "kind": "fault"}"#).status == 400)
        // Only rules made here are removed.
        #expect(try call("POST", "/api/rules/remove", json: #"{"id": "mock"}"#).status == 404)
        #expect(try call("POST", "/api/rules/remove", json: #"{"id": "web-1"}"#).status == 200)
    }

    @Test("Without a running proxy (view of a saved capture) the rules routes answer 404 and the panel is off")
    func notWired() throws {
        let plain = WebRouter(reader: try CaptureReader(path: path), context: WebRouterTests.context(path))
        #expect(try call("GET", "/api/rules", on: plain).status == 404)
        #expect(try call("POST", "/api/rules/enabled", json: #"{"id": "mock", "enabled": false}"#, on: plain).status == 404)
        let info = try #require(try call("GET", "/api/info", on: plain).json as? [String: Any])
        #expect((info["features"] as? [String: Bool])?["rules"] == false)
    }
}

@Suite("Web view server: rules")
struct WebRulesServerTests {
    @Test("A POST's JSON body reaches the router over a socket; one over the limit is answered 413 and closed")
    func postBodies() throws {
        let fake = FakeRuleControl()
        var extensions = WebViewExtensions()
        extensions.rules = fake.control
        let server = try WebServerTests.Running(extensions: extensions)
        defer { server.stop() }
        let client = try server.connect()
        defer { client.close() }
        let body = #"{"id": "mock", "enabled": false}"#
        try WebServerTests.send(client, "POST /api/rules/enabled HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
        let answer = try WebServerTests.read(client, until: "faultKinds")
        #expect(answer.hasPrefix("HTTP/1.1 200 "), "\(answer)")
        #expect(fake.rules.withLock { $0.first?.enabled } == false)

        let big = try server.connect()
        defer { big.close() }
        let size = WebRequest.bodyLimit + 1
        try WebServerTests.send(big, "POST /api/rules/enabled HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(size)\r\n\r\n" + String(repeating: " ", count: size))
        #expect(try WebServerTests.read(big, until: "\u{0}").hasPrefix("HTTP/1.1 413 "))
    }
}
