import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace
import Testing
import TestSupport

@testable import WebView

/// Replay and compose (issue 34) below the socket: the head the proxy's own client writes, the URL it reads, and
/// `POST /api/replay`'s refusals. The request through a running proxy is Tests/webview/replay_test.py's.
@Suite("Web view: replay")
struct WebReplayTests {
    @Test("A replay's head: Host first, the fields in order with the framing where it was, the marker; no hop-by-hop field")
    func replayHead() throws {
        let request = ReplayRequest(
            method: "POST", url: "https://api.test:8443/v1/x?y=1#frag",
            headers: [
                ("Host", "stale.test"), ("User-Agent", "app/1"), ("Content-Length", "99"), ("Connection", "keep-alive"),
                ("Proxy-Authorization", "Basic old"), ("X-ATSProxy-Replay-Of", "3"), ("Accept", "*/*"),
            ],
            body: Array("hello".utf8), replayOf: 12)
        let target = try #require(ReplayClient.Target(request.url))
        #expect(target == ReplayClient.Target("https://api.test:8443/v1/x?y=1"))
        #expect(target.authority == "api.test:8443" && target.path == "/v1/x?y=1" && target.secure)
        let inside = String(decoding: ReplayClient.head(request, target: target, absolute: false, authorization: nil), as: UTF8.self)
        #expect(inside == """
            POST /v1/x?y=1 HTTP/1.1\r
            Host: api.test:8443\r
            User-Agent: app/1\r
            Content-Length: 5\r
            Accept: */*\r
            X-ATSProxy-Replay-Of: 12\r
            \r

            """)
        // Cleartext: absolute-form, with the proxy's credentials; a body-less GET has no framing field.
        let get = ReplayRequest(method: "GET", url: "http://plain.test/a", headers: [("Accept", "*/*")], body: [], replayOf: nil)
        let plain = try #require(ReplayClient.Target(get.url))
        #expect(String(decoding: ReplayClient.head(get, target: plain, absolute: true, authorization: "Basic eDp5"), as: UTF8.self)
            == "GET http://plain.test/a HTTP/1.1\r\nHost: plain.test\r\nAccept: */*\r\nProxy-Authorization: Basic eDp5\r\n\r\n")
    }

    @Test("URLs the client reads, and those it refuses")
    func targets() {
        #expect(ReplayClient.Target("HTTPS://[::1]:9443")?.authority == "[::1]:9443")
        #expect(ReplayClient.Target("https://[::1]:9443/")?.bareHost == "::1")
        #expect(ReplayClient.Target("http://h.test?q")?.path == "/?q")
        #expect(ReplayClient.Target("https://h.test:443/")?.authority == "h.test")
        for bad in ["ftp://h.test/", "h.test/x", "https://:80/", "https://h.test:0/", "https://h.test:x/"] {
            #expect(ReplayClient.Target(bad) == nil, "\(bad)")
        }
    }

    @Test("A bad method or field is refused before anything is sent; an unreachable proxy is named")
    func refusals() {
        let client = ReplayClient(proxyHost: "127.0.0.1", proxyPort: 9, caPEM: nil, timeout: 2)
        func message(_ r: ReplayRequest) -> String? {
            do { _ = try client.send(r) } catch { return error.message }
            return nil
        }
        #expect(message(ReplayRequest(method: "G T", url: "http://a.test/", headers: [], body: [], replayOf: nil))?
            .hasPrefix("not a method") == true)
        #expect(message(ReplayRequest(
            method: "GET", url: "http://a.test/", headers: [("X", "a\r\nInjected: 1")], body: [], replayOf: nil))?
            .hasPrefix("not a header field") == true)
        #expect(message(ReplayRequest(method: "GET", url: "mailto:x", headers: [], body: [], replayOf: nil))?
            .hasPrefix("not an absolute") == true)
        #expect(message(ReplayRequest(method: "GET", url: "http://a.test/", headers: [], body: [], replayOf: nil))?
            .hasPrefix("cannot reach the proxy at 127.0.0.1:9") == true)
    }

    @Test("POST /api/replay: 404 without a proxy, 403 cross-site, 400 for a bad body, 502 for no proxy, 405 for GET")
    func routeRefusals() throws {
        let rules = try WebRulesTests()
        #expect(try rules.call("POST", "/api/replay", json: "{\"exchange\": 1}").status == 404)
        var context = WebRouterTests.context(rules.path)
        context.extensions.replay = ReplayClient(proxyHost: "127.0.0.1", proxyPort: 9, caPEM: nil, timeout: 2)
        let router = WebRouter(reader: try CaptureReader(path: rules.path), context: context)
        #expect(try rules.call(
            "POST", "/api/replay", json: "{\"exchange\": 1}", headers: [("Sec-Fetch-Site", "cross-site")], on: router)
            .status == 403)
        #expect(try rules.call("POST", "/api/replay", json: "[1]", on: router).status == 400)
        #expect(try rules.call("POST", "/api/replay", json: "{\"method\": \"GET\"}", on: router).status == 400)
        #expect(try rules.call("POST", "/api/replay", json: "{\"exchange\": 99}", on: router).status == 404)
        #expect(try rules.call("GET", "/api/replay", on: router).status == 405)
        // The proxy is not there: the answer says so, as a bad gateway.
        let down = try rules.call("POST", "/api/replay", json: "{\"exchange\": 1}", on: router)
        #expect(down.status == 502)
        #expect(((down.json as? [String: Any])?["error"] as? String)?.contains("cannot reach the proxy") == true)
        let info = try rules.call("GET", "/api/info", on: router)
        #expect(((info.json as? [String: Any])?["features"] as? [String: Bool])?["replay"] == true)
    }
}
