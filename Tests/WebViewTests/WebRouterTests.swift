import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace
import Testing

@testable import WebView

/// The router over a capture with known content (`CaptureFixture`), as scripts and the page call it.
@Suite("Web view API")
struct WebRouterTests {
    let fixture: CaptureFixture
    let router: WebRouter

    init() throws {
        fixture = try CaptureFixture()
        router = WebRouter(reader: try CaptureReader(path: fixture.path), context: Self.context(fixture.path))
    }

    static func context(_ path: String) -> WebViewContext {
        WebViewContext(
            proxyAddress: "127.0.0.1:8080", proxyURL: "http://127.0.0.1:8080", caPath: "certs/atsproxy-ca.pem",
            policy: "Test.plist", iosProfile: "iOS 26", atsMode: "enforce", blockStyle: "http", capturePath: path,
            captureIsTemporary: false, live: true, version: "test")
    }

    /// Routes `target` and returns the status and the body as JSON (or raw bytes when it is not JSON).
    func get(_ target: String, method: String = "GET") throws -> (status: Int, json: [String: Any], response: WebResponse) {
        let request = try #require(WebRequest(head: HTTPRequestHead(method: method, target: target)))
        guard case .respond(let response) = router.route(request) else {
            Issue.record("\(target) started a stream")
            return (0, [:], WebResponse(status: 0))
        }
        // A body that starts as a JSON object must parse (a malformed one fails the test); others are bytes.
        var json: [String: Any] = [:]
        if response.body.first == UInt8(ascii: "{") {
            json = try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any] ?? [:]
        }
        return (response.status, json, response)
    }

    func ids(_ target: String) throws -> [Int] {
        let (status, json, _) = try get(target)
        #expect(status == 200, "\(target)")
        return (json["exchanges"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? Int }
    }

    @Test("The list is newest first, pages with before= and after= without gaps or repeats, and says when more follow")
    func paging() throws {
        #expect(try ids("/api/exchanges?limit=3") == [40, 39, 38])
        #expect(try get("/api/exchanges?limit=3").json["more"] as? Bool == true)
        #expect(try ids("/api/exchanges?limit=3&before=38") == [37, 36, 35])
        #expect(try ids("/api/exchanges?limit=3&after=35") == [36, 37, 38])
        #expect(try get("/api/exchanges?limit=5&after=35").json["more"] as? Bool == false)
        // Walking the whole capture backwards in pages of 7 meets every exchange once.
        var seen: [Int] = []
        var cursor = ""
        for _ in 0..<10 {
            let page = try ids("/api/exchanges?limit=7" + cursor)
            if page.isEmpty { break }
            seen += page
            cursor = "&before=\(page.last!)"
        }
        #expect(seen == Array((1...40).reversed()))
    }

    @Test("Filters: host, verdict, status class and range, method, URL text, only problems; count agrees")
    func filters() throws {
        #expect(try ids("/api/exchanges?host=h1.test").count == 10)
        #expect(try ids("/api/exchanges?host=H1.TEST&limit=2") == [37, 33])
        #expect(try ids("/api/exchanges?verdict=blocked") == [40])
        #expect(try ids("/api/exchanges?verdict=ok").count == 39)
        #expect(try ids("/api/exchanges?status=5xx") == [40, 36, 30, 24, 18, 12, 6])
        #expect(try ids("/api/exchanges?status=503") == [36, 30, 24, 18, 12, 6])
        #expect(try ids("/api/exchanges?status=500-502") == [40])
        #expect(try ids("/api/exchanges?method=post") == [40, 35, 30, 25, 20, 15, 10, 5])
        #expect(try ids("/api/exchanges?text=item/1") == [19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 1])
        #expect(try ids("/api/exchanges?problems=1") == [40, 36, 30, 24, 18, 12, 6])
        #expect(try ids("/api/exchanges?problems=1&host=h0.test") == [36, 24, 12])
        // The capture filter language, as `show --filter` takes it, alone and with the other parameters.
        #expect(try ids("/api/exchanges?q=verdict:blocked%20or%20status:503&host=h0.test") == [36, 24, 12])
        #expect(try ids("/api/exchanges?q=method:POST%20-status:200&problems=1") == [40, 30])
        #expect(try get("/api/exchanges/count?problems=1").json["count"] as? Int == 7)
        #expect(try get("/api/exchanges/count").json["count"] as? Int == 40)
        // Rows carry what the list shows.
        let row = try #require((try get("/api/exchanges?limit=1").json["exchanges"] as? [[String: Any]])?.first)
        #expect(row["host"] as? String == "old.test")
        #expect(row["path"] as? String == "/login")
        #expect(row["verdict"] as? String == "blocked")
        #expect(row["errors"] as? [String] == ["-1200/-9836"])
        #expect(row["protocol"] as? String == "HTTP/1.1")
        #expect(row["kind"] as? String == "http")
    }

    @Test("Bad parameters are answered 400 with a message that names them", arguments: [
        ("/api/exchanges?limit=0", "limit"), ("/api/exchanges?limit=abc", "limit"), ("/api/exchanges?limit=5000", "limit"),
        ("/api/exchanges?status=6zz", "status"), ("/api/exchanges?status=499-400", "status"),
        ("/api/exchanges?verdict=bogus", "verdict"), ("/api/exchanges?before=1&after=2", "not both"),
        ("/api/exchanges?before=x", "before"), ("/api/exchanges?hots=a", "unknown parameter 'hots'"),
        ("/api/exchanges/count?limit=3", "unknown parameter 'limit'"), ("/api/exchanges?problems=maybe", "problems"),
        ("/api/stream?verdict=nope", "verdict"), ("/api/exchanges?q=status:", "q: "),
        ("/api/exchanges?q=problems&q=problems", "parameter 'q' is given more than once"),
        ("/api/exchanges/count?problems=1&host=a&problems=1", "parameter 'problems' is given more than once"),
    ])
    func badParameters(target: String, named: String) throws {
        let (status, json, _) = try get(target)
        #expect(status == 400)
        #expect((json["error"] as? String)?.contains(named) == true, "\(json)")
    }

    @Test("Unknown exchanges, bodies and routes are 404; other methods 405")
    func notFound() throws {
        #expect(try get("/api/exchanges/99999").status == 404)
        #expect((try get("/api/exchanges/99999").json["error"] as? String)?.contains("no exchange 99999") == true)
        #expect(try get("/api/exchanges/abc").status == 404)
        #expect(try get("/api/exchanges/99999/body/response").status == 404)
        #expect(try get("/api/exchanges/1/body/sideways").status == 404)
        #expect(try get("/api/nothing-here").status == 404)
        #expect(try get("/api/report").status == 404)
        #expect(try get("/api/har").status == 404)
        let post = try get("/api/exchanges", method: "POST")
        #expect(post.status == 405)
        #expect(post.response.headers[first: "Allow"] == "GET, HEAD")
    }

    @Test("One exchange in full: heads, decision, each violation with the app's error and the fix as plist, trace, curl")
    func detail() throws {
        let (status, json, _) = try get("/api/exchanges/40")
        #expect(status == 200)
        let decision = try #require(json["decision"] as? [String: Any])
        #expect(decision["decidedBy"] as? String == "NSAppTransportSecurity › NSExceptionDomains › old.test")
        let violation = try #require((json["violations"] as? [[String: Any]])?.first)
        #expect(violation["urlError"] as? Int == -1200)
        #expect(violation["sslError"] as? Int == -9836)
        #expect((violation["appError"] as? String)?.hasPrefix("Error Domain=NSURLErrorDomain Code=-1200") == true)
        #expect((violation["appError"] as? String)?.contains("_kCFStreamErrorCodeKey=-9836") == true)
        let plist = try #require(violation["fixPlist"] as? String)
        #expect(plist.contains("<key>old.test</key>"))
        #expect(plist.contains("<key>NSExceptionMinimumTLSVersion</key>"))
        #expect(plist.contains("<string>TLSv1.0</string>"))
        let request = try #require(json["request"] as? [String: Any])
        #expect(request["line"] as? String == "POST /login HTTP/1.1")
        #expect((request["headers"] as? [[String]])?.contains(["X-Token", "it's"]) == true)
        #expect((json["clientResponse"] as? [String: Any])?["line"] as? String == "HTTP/1.1 502 Bad Gateway")
        let trace = try #require(json["trace"] as? [[String: Any]])
        #expect(trace.compactMap { $0["title"] as? String } == ["TCP Connection", "ATS Decision"])
        let tls = try #require((json["connection"] as? [String: Any])?["upstreamTLS"] as? [String: Any])
        #expect(tls["version"] as? String == "TLSv1")
        let body = try #require(json["responseBody"] as? [String: Any])
        #expect(body["size"] as? Int == 300)
        #expect(body["kept"] as? Int == 25)
        #expect(body["truncated"] as? Bool == true)
        let curl = try #require(json["curl"] as? String)
        #expect(curl == "curl -x http://127.0.0.1:8080 --cacert certs/atsproxy-ca.pem -X POST "
            + "-H 'Content-Type: text/plain' -H 'X-Token: it'\\''s' --data-binary user=a https://old.test/login")
    }

    @Test("Body bytes come back as kept; a captured page is served as inert bytes, never as HTML on the view's origin")
    func bodies() throws {
        let json = try get("/api/exchanges/7/body/response").response
        #expect(json.status == 200)
        #expect(json.body == Array("{\"n\":7}".utf8))
        let html = try get("/api/exchanges/40/body/response").response
        #expect(html.body == Array("<script>alert(1)</script>".utf8))
        #expect(html.headers[first: "Content-Type"] == "application/octet-stream")
        #expect(html.headers[first: "Content-Security-Policy"]?.hasPrefix("sandbox") == true)
        #expect(html.headers[first: "X-Body-Size"] == "300")
        #expect(html.headers[first: "X-Body-Truncated"] == "1")
        #expect(try get("/api/exchanges/40/body/request").response.body == Array("user=a".utf8))
        // An empty body is an empty answer, not a missing one.
        let empty = try get("/api/exchanges/7/body/request").response
        #expect(empty.status == 200)
        #expect(empty.body.isEmpty)
        #expect(empty.headers[first: "X-Body-Size"] == "0")
    }

    @Test("The hosts summary counts per host and verdict, and takes in exchanges written after it was first read")
    func hosts() throws {
        func hosts() throws -> [String: [String: Any]] {
            let list = try #require(try get("/api/hosts").json["hosts"] as? [[String: Any]])
            return Dictionary(uniqueKeysWithValues: list.map { ($0["host"] as? String ?? "", $0) })
        }
        var summary = try hosts()
        #expect(summary.count == 5)
        #expect(summary["old.test"]?["verdict"] as? String == "blocked")
        #expect(summary["old.test"]?["errors"] as? [String] == ["-1200/-9836"])
        #expect(summary["old.test"]?["decidedBy"] as? String == "NSAppTransportSecurity › NSExceptionDomains › old.test")
        #expect(summary["h1.test"]?["exchanges"] as? Int == 10)
        #expect(summary["h1.test"]?["verdicts"] as? [String: Int] == ["ok": 10])
        #expect(try get("/api/hosts").json["exchanges"] as? Int == 40)
        // The blocked host sorts first.
        #expect((try get("/api/hosts").json["hosts"] as? [[String: Any]])?.first?["host"] as? String == "old.test")

        try fixture.writer.write([.exchange(CaptureFixture.plain(41)), .exchange(CaptureFixture.blocked())])
        summary = try hosts()
        #expect(summary["h1.test"]?["exchanges"] as? Int == 11)
        #expect(summary["old.test"]?["verdicts"] as? [String: Int] == ["blocked": 2])
        #expect(try get("/api/hosts").json["exchanges"] as? Int == 42)
    }

    @Test("The proxy's own set-up site is listed apart from the app's hosts, marked as the proxy's own")
    func proxySiteHosts() throws {
        var site = ExchangeSummary(
            method: "GET", url: "http://atsproxy.invalid/", status: 200, httpVersion: "HTTP/1.1",
            outcome: .notEvaluated, errors: [], requestBytes: 0, responseBytes: 900, durationMilliseconds: 1)
        site.connection = ConnectionRecord(connectionID: 500, decision: nil, violations: [])
        site.action = .proxySite
        var relayed = CaptureFixture.plain(41)
        relayed.url = "http://atsproxy.invalid/x"
        try fixture.writer.write([.exchange(site), .exchange(site), .exchange(relayed)])
        let json = try get("/api/hosts").json
        let hosts = try #require(json["hosts"] as? [[String: Any]])
        let own = try #require(json["proxySite"] as? [[String: Any]])
        #expect(own.map { $0["host"] as? String } == ["atsproxy.invalid"])
        #expect(own.first?["exchanges"] as? Int == 2)
        #expect(own.first?["proxySite"] as? Bool == true)
        // The same name relayed as ordinary traffic (a capture of an older build could hold one) stays a host.
        let app = hosts.first { $0["host"] as? String == "atsproxy.invalid" }
        #expect(app?["exchanges"] as? Int == 1)
        #expect(app?["proxySite"] as? Bool == false)
        #expect(json["exchanges"] as? Int == 43)
    }

    @Test("A stream sends what arrived after its cursor, oldest first, and asks for a re-sync past one batch")
    func stream() throws {
        let request = try #require(WebRequest(head: HTTPRequestHead(method: "GET", target: "/api/stream?verdict=ok")))
        guard case .stream(let filter, let after) = router.route(request) else {
            Issue.record("no stream")
            return
        }
        #expect(after == 40)
        #expect(filter.outcome == .allowed)
        #expect(try router.streamUpdate(filter: filter, after: after) == .nothing)
        try fixture.writer.write([.exchange(CaptureFixture.blocked()), .exchange(CaptureFixture.plain(42))])
        guard case .rows(let json, let last) = try router.streamUpdate(filter: filter, after: after) else {
            Issue.record("no rows")
            return
        }
        #expect(last == 42)
        let rows = try #require(
            (try JSONSerialization.jsonObject(with: Data(json)) as? [String: Any])?["exchanges"] as? [[String: Any]])
        #expect(rows.compactMap { $0["id"] as? Int } == [42])
        try fixture.writer.write((43...300).map { .exchange(CaptureFixture.plain($0)) })
        #expect(try router.streamUpdate(filter: filter, after: 42) == .resync(latest: 300))
    }

    @Test("The page and its files are served with a content security policy that allows only the view's own files")
    func page() throws {
        let page = try get("/").response
        #expect(page.status == 200)
        #expect(page.headers[first: "Content-Type"] == "text/html; charset=utf-8")
        #expect(page.headers[first: "Content-Security-Policy"]?.contains("script-src 'self'") == true)
        #expect(String(decoding: page.body, as: UTF8.self).contains("<script src=\"/app.js\""))
        #expect(try get("/app.js").response.headers[first: "Content-Type"] == "text/javascript; charset=utf-8")
        #expect(try get("/style.css").status == 200)
        let info = try get("/api/info").json
        #expect(info["proxyAddress"] as? String == "127.0.0.1:8080")
        #expect(info["onboardingURL"] as? String == "http://127.0.0.1:8080/")
        #expect(info["exchanges"] as? Int == 40)
        #expect(info["features"] as? [String: Bool]
            == ["har": false, "replay": false, "report": false, "rules": false, "breakpoints": false])
    }
}

@Suite("Web view requests and assets")
struct WebRequestTests {
    @Test("Targets are split into a decoded path and parameters; a target that is not a path is refused")
    func parsing() throws {
        let request = try #require(WebRequest(head: HTTPRequestHead(
            method: "GET", target: "/api/exchanges?text=a+b%2Fc&host=x.test&flag")))
        #expect(request.path == "/api/exchanges")
        #expect(request.parameter("text") == "a b/c")
        #expect(request.parameter("host") == "x.test")
        #expect(request.parameter("flag") == "")
        #expect(WebRequest(head: HTTPRequestHead(method: "GET", target: "http://a.test/")) == nil)
        #expect(WebRequest(head: HTTPRequestHead(method: "GET", target: "/a?x=%zz")) == nil)
        #expect(WebRequest(head: HTTPRequestHead(method: "GET", target: "/a?x=%ff")) == nil)
    }

    @Test("Host fields naming loopback are told from others (DNS rebinding)", arguments: [
        ("127.0.0.1:8081", true), ("localhost", true), ("LOCALHOST:8081", true), ("[::1]:8081", true),
        ("127.1.2.3", true), ("evil.example:8081", false), ("127.0.0.1.evil.example", false), ("[::2]", false),
    ])
    func loopbackHosts(value: String, loopback: Bool) {
        #expect(WebServer.isLoopbackHost(value) == loopback)
    }

    @Test("The page compiled into the binary is the files in Sources/WebView/Assets (run scripts/embed-web-assets)")
    func embeddedAssets() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/WebView/Assets")
        for (name, embedded) in [("index.html", WebAssets.indexHTML), ("app.js", WebAssets.appJS),
                                 ("style.css", WebAssets.styleCSS)] {
            let file = try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
            #expect(file == embedded, "\(name) differs from its embedded copy: run scripts/embed-web-assets")
        }
    }
}
