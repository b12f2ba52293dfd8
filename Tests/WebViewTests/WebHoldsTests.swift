import CaptureStore
import Foundation
import HTTP1Core
import ProxyCore
import Synchronization
import Testing
import TestSupport

@testable import WebView

/// The held exchanges' API over a real HoldRegistry: the test registers exchanges as a session's adapter does, with a
/// `deliver` that records the release the page decided.
/// What `deliver` was handed, per held exchange.
final class Releases: Sendable {
    private let value = Mutex<[UInt64: HoldRelease]>([:])
    func withLock<T>(_ body: (inout [UInt64: HoldRelease]) -> T) -> T { value.withLock { body(&$0) } }
}

@Suite("Web view API: held exchanges")
struct WebHoldsTests {
    let holds = HoldRegistry()
    let released = Releases()
    let rules: WebRulesTests
    let router: WebRouter

    init() throws {
        rules = try WebRulesTests()
        var context = WebRouterTests.context(rules.path)
        context.extensions.holds = holds
        context.extensions.rules = rules.fake.control
        router = WebRouter(reader: try CaptureReader(path: rules.path), context: context)
    }

    func call(_ method: String, _ target: String, json: String? = nil, headers: [(String, String)] = [])
        throws -> (status: Int, json: Any?)
    {
        try rules.call(method, target, json: json, headers: headers, on: router)
    }

    /// Holds a request (phase `.request`) or its response, as a session would.
    @discardableResult
    func hold(_ phase: HeldExchange.Phase = .request, body: [UInt8] = Array("{\"a\":1}".utf8)) -> UInt64 {
        let id = holds.makeID()
        let request = HTTPRequestHead(
            method: "POST", target: "/v1/login?x=1",
            headers: [("Host", "api.test"), ("Content-Type", "application/json"), ("Content-Length", "7")])
        holds.register(
            HeldExchange(
                id: id, connectionID: 7, phase: phase, url: "https://api.test/v1/login?x=1", request: request,
                requestBody: body,
                response: phase == .response
                    ? HTTPResponseHead(status: 200, reason: "OK", headers: [("Content-Length", "2")]) : nil,
                responseBody: phase == .response ? Array("ok".utf8) : [],
                breakpoint: "--breakpoint #1", heldAt: 1_700_000_000, deadline: 1_700_000_060)
        ) { [released] release in released.withLock { $0[id] = release } }
        return id
    }

    @Test("GET /api/held lists each held exchange with its heads, bodies (text or base64) and deadline")
    func list() throws {
        let empty = try #require(try call("GET", "/api/held").json as? [String: Any])
        #expect((empty["held"] as? [Any])?.isEmpty == true)
        let first = hold()
        let second = hold(.response, body: [0xff, 0x00])
        let answer = try #require(try call("GET", "/api/held").json as? [String: Any])
        let held = try #require(answer["held"] as? [[String: Any]])
        #expect(held.map { $0["id"] as? Int } == [Int(first), Int(second)])
        #expect(held[0]["phase"] as? String == "request")
        #expect(held[0]["url"] as? String == "https://api.test/v1/login?x=1")
        #expect(held[0]["method"] as? String == "POST")
        #expect(held[0]["connection"] as? Int == 7)
        #expect(held[0]["breakpoint"] as? String == "--breakpoint #1")
        #expect(held[0]["deadline"] as? Double == 1_700_000_060)
        #expect((held[0]["request"] as? [String: Any])?["headers"] as? [[String]] == [
            ["Host", "api.test"], ["Content-Type", "application/json"], ["Content-Length", "7"],
        ])
        #expect((held[0]["requestBody"] as? [String: Any])?["text"] as? String == "{\"a\":1}")
        #expect(held[0]["response"] == nil)
        #expect((held[1]["requestBody"] as? [String: Any])?["base64"] as? String == "/wA=")
        #expect((held[1]["response"] as? [String: Any])?["status"] as? Int == 200)
        #expect((held[1]["responseBody"] as? [String: Any])?["text"] as? String == "ok")
        #expect(answer["now"] is Double)
        let info = try #require(try call("GET", "/api/info").json as? [String: Any])
        #expect((info["features"] as? [String: Bool])?["breakpoints"] == true)
    }

    @Test("Execute with an edited request: a header added, the URL's path changed, Content-Length dropped")
    func executeEdited() throws {
        let id = hold()
        let edit = """
            {"action": "execute", "request": {"method": "PUT", "url": "https://api.test/v2/login?y=2",
             "headers": [["Host", "api.test"], ["Content-Type", "application/json"], ["Content-Length", "7"],
                         ["X-Debug", " on "], ["", ""]],
             "body": "{\\"a\\":2,\\"b\\":3}"}}
            """
        let answer = try call("POST", "/api/held/\(id)", json: edit)
        #expect(answer.status == 200)
        let release = try #require(released.withLock { $0[id] })
        guard case .execute(let request?, let body?, nil, nil) = release else {
            Issue.record("expected an edited request, got \(release)")
            return
        }
        #expect(request.method == "PUT")
        #expect(request.target == "/v2/login?y=2")
        #expect(request.headers.fields.map { [$0.name, $0.value] } == [
            ["Host", "api.test"], ["Content-Type", "application/json"], ["X-Debug", "on"],
        ])
        #expect(body == Array("{\"a\":2,\"b\":3}".utf8))
        #expect(holds.list().isEmpty)
        // The body unedited: the held framing stays, whatever the edited head said.
        let kept = hold()
        let head = #"{"action": "execute", "request": {"headers": [["Host", "api.test"], ["Content-Length", "99"]]}}"#
        #expect(try call("POST", "/api/held/\(kept)", json: head).status == 200)
        guard case .execute(let keptHead?, nil, nil, nil) = try #require(released.withLock { $0[kept] }) else {
            Issue.record("expected an edited head and the body as it came")
            return
        }
        #expect(keptHead.headers.fields.map { [$0.name, $0.value] } == [["Host", "api.test"], ["Content-Length", "7"]])
        // Released once: a second release (another page, a double click) is too late.
        #expect(try call("POST", "/api/held/\(id)", json: #"{"action": "execute"}"#).status == 409)
    }

    @Test("Execute unchanged, abort, and answer locally reach the session as the registry's releases")
    func releases() throws {
        let plain = hold()
        let aborted = hold()
        let answered = hold()
        #expect(try call("POST", "/api/held/\(plain)", json: #"{"action": "execute"}"#).status == 200)
        #expect(try call("POST", "/api/held/\(aborted)", json: #"{"action": "abort"}"#).status == 200)
        let answer = """
            {"action": "answer", "response": {"status": 503, "headers": [["Retry-After", "30"], ["Content-Length", "1"]],
             "body": "down"}}
            """
        #expect(try call("POST", "/api/held/\(answered)", json: answer).status == 200)
        let got = released.withLock { $0 }
        #expect(got[plain] == .execute())
        #expect(got[aborted] == .abort)
        #expect(got[answered] == .answer(
            HTTPResponseHead(status: 503, reason: "Service Unavailable", headers: [("Retry-After", "30")]),
            Array("down".utf8)))
    }

    @Test("A held response is executed with its status, headers and body edited")
    func editResponse() throws {
        let id = hold(.response)
        let edit = #"{"action": "execute", "response": {"status": 503, "headers": [["X-Edited", "1"]], "body": "no"}}"#
        #expect(try call("POST", "/api/held/\(id)", json: edit).status == 200)
        #expect(released.withLock { $0[id] } == .execute(
            response: HTTPResponseHead(status: 503, reason: "Service Unavailable", headers: [("X-Edited", "1")]),
            responseBody: Array("no".utf8)))
    }

    @Test("A bad edit is refused with a message and the exchange stays held")
    func badEdits() throws {
        let id = hold()
        let response = hold(.response)
        let cases: [(UInt64, String, String)] = [
            (id, #"{"action": "execute", "request": {"headers": [["Bad Name", "x"]]}}"#, "not a header name"),
            (id, #"{"action": "execute", "request": {"headers": [["X-A", "a\r\nX-B: b"]]}}"#, "one line"),
            (id, #"{"action": "execute", "request": {"method": "GE T"}}"#, "not a method"),
            (id, #"{"action": "execute", "request": {"url": "https://elsewhere.test/v1/login"}}"#, "keep https://api.test"),
            (id, #"{"action": "execute", "response": {"status": 500}}"#, "request is held"),
            (id, #"{"action": "answer", "response": {"status": 99}}"#, "not a final status"),
            (id, #"{"action": "answer"}"#, "needs \"response\""),
            (id, #"{"action": "resume"}"#, "no action 'resume'"),
            (id, "not json", "expected {"),
            (response, #"{"action": "answer", "response": {"status": 200}}"#, "only a held request"),
        ]
        for (target, json, message) in cases {
            let answer = try call("POST", "/api/held/\(target)", json: json)
            #expect(answer.status == 400, "\(json)")
            let error = (answer.json as? [String: Any])?["error"] as? String ?? ""
            #expect(error.contains(message), "\(json): \(error)")
        }
        #expect(holds.list().count == 2)
        #expect(released.withLock { $0.isEmpty })
    }

    @Test("Unknown ids, cross-site posts and a view with no proxy are refused")
    func refusals() throws {
        let id = hold()
        #expect(try call("POST", "/api/held/999", json: #"{"action": "abort"}"#).status == 409)
        #expect(try call("POST", "/api/held/x", json: #"{"action": "abort"}"#).status == 404)
        #expect(try call("POST", "/api/held/\(id)", json: #"{"action": "abort"}"#,
                         headers: [("Origin", "http://evil.test")]).status == 403)
        #expect(try call("POST", "/api/held/\(id)", json: #"{"action": "abort"}"#,
                         headers: [("Sec-Fetch-Site", "cross-site")]).status == 403)
        // A form post (not JSON) cannot release it either.
        var fields = HTTPHeaders([("Host", "127.0.0.1:8081"), ("Content-Type", "text/plain")])
        fields.add(name: "Origin", value: "http://127.0.0.1:8081")
        var form = try #require(WebRequest(head: HTTPRequestHead(method: "POST", target: "/api/held/\(id)", headers: fields)))
        form.body = Array(#"{"action": "abort"}"#.utf8)
        guard case .respond(let refused) = router.route(form) else { throw Refused() }
        #expect(refused.status == 403)
        #expect(holds.list().count == 1)
        #expect(try call("GET", "/api/held/\(id)").status == 404)
        // `atsproxy view` (a saved capture): no proxy, nothing held.
        #expect(try rules.call("GET", "/api/held").status == 404)
        #expect(try rules.call("POST", "/api/held/\(id)", json: #"{"action": "abort"}"#).status == 404)
    }

    struct Refused: Error {}

    @Test("\"Break on the next request to this URL\" asks the rule book for a breakpoint on the exchange")
    func breakpointRule() throws {
        let made = try call("POST", "/api/rules", json: #"{"exchange": 2, "kind": "breakpoint"}"#)
        #expect(made.status == 201)
        let asked = rules.fake.made.withLock { $0.map { "\($0.0) \($0.1)" } }
        #expect(asked == ["breakpoint 2"])
    }

    @Test("The live stream says `held` at once on every hold and release")
    func streamPushes() throws {
        var extensions = WebViewExtensions()
        extensions.holds = holds
        let server = try WebServerTests.Running(extensions: extensions)
        defer { server.stop() }
        let client = try server.connect()
        defer { client.close() }
        try WebServerTests.send(client, "GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(try WebServerTests.read(client, until: "event: hello").contains("event: hello"))
        let id = hold()
        #expect(try WebServerTests.read(client, until: "event: held\ndata: {}\n\n").contains("event: held"))
        holds.release(id, .abort)
        #expect(try WebServerTests.read(client, until: "event: held\ndata: {}\n\n").contains("event: held"))
    }
}
