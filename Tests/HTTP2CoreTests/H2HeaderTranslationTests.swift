import HTTP2Core
import HTTP1Core
import Testing

@Suite("Header translation between HTTP/2 and HTTP/1.1")
struct H2HeaderTranslationTests {
    struct RequestToH1: CustomTestStringConvertible, Sendable {
        var name: String
        var h2: [H2Header]
        var expected: H1RequestHead
        var testDescription: String { name }
    }

    static let requestsToH1: [RequestToH1] = [
        RequestToH1(
            name: "pseudo-headers become request line and Host",
            h2: [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "a.test:8443"),
                 H2Header(":path", "/x?y=1"), H2Header("accept", "*/*")],
            expected: H1RequestHead(
                method: "GET", target: "/x?y=1", headers: [H2Header("host", "a.test:8443"), H2Header("accept", "*/*")])),
        RequestToH1(
            name: "cookie crumbs are joined with '; ' at the first cookie's place",
            h2: [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "a.test"),
                 H2Header(":path", "/"), H2Header("cookie", "a=1"), H2Header("accept", "x"), H2Header("cookie", "b=2"),
                 H2Header("cookie", "c=3")],
            expected: H1RequestHead(
                method: "GET", target: "/",
                headers: [H2Header("host", "a.test"), H2Header("cookie", "a=1; b=2; c=3"), H2Header("accept", "x")])),
        RequestToH1(
            name: "connection-specific fields are dropped, TE: trailers kept",
            h2: [H2Header(":method", "POST"), H2Header(":scheme", "https"), H2Header(":authority", "a.test"),
                 H2Header(":path", "/p"), H2Header("connection", "x-hop"), H2Header("x-hop", "1"),
                 H2Header("keep-alive", "5"), H2Header("proxy-connection", "keep-alive"),
                 H2Header("transfer-encoding", "chunked"), H2Header("upgrade", "h2c"), H2Header("te", "trailers"),
                 H2Header("content-length", "3")],
            expected: H1RequestHead(
                method: "POST", target: "/p",
                headers: [H2Header("host", "a.test"), H2Header("te", "trailers"), H2Header("content-length", "3")])),
        RequestToH1(
            name: "TE other than trailers is dropped",
            h2: [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "a.test"),
                 H2Header(":path", "/"), H2Header("te", "gzip")],
            expected: H1RequestHead(method: "GET", target: "/", headers: [H2Header("host", "a.test")])),
        RequestToH1(
            name: ":authority and a host field naming the same host become one Host",
            h2: [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "a.test"),
                 H2Header(":path", "/"), H2Header("host", "A.test")],
            expected: H1RequestHead(method: "GET", target: "/", headers: [H2Header("host", "a.test")])),
        RequestToH1(
            name: "a host field stands in for a missing :authority",
            h2: [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":path", "/"),
                 H2Header("host", "b.test")],
            expected: H1RequestHead(method: "GET", target: "/", headers: [H2Header("host", "b.test")])),
        RequestToH1(
            name: "CONNECT uses :authority as the target",
            h2: [H2Header(":method", "CONNECT"), H2Header(":authority", "c.test:443")],
            expected: H1RequestHead(method: "CONNECT", target: "c.test:443", headers: [H2Header("host", "c.test:443")])),
    ]

    @Test("HTTP/2 request → HTTP/1.1", arguments: requestsToH1)
    func requestToH1(_ testCase: RequestToH1) throws {
        #expect(try H2HeaderTranslation.h1Request(from: testCase.h2) == testCase.expected)
    }

    struct RequestToH2: CustomTestStringConvertible, Sendable {
        var name: String
        var h1: H1RequestHead
        var expected: [H2Header]
        var testDescription: String { name }
    }

    static let requestsToH2: [RequestToH2] = [
        RequestToH2(
            name: "origin-form with Host; names lowercased; pseudo-headers first",
            h1: H1RequestHead(
                method: "GET", target: "/index.html",
                headers: [H2Header("Accept", "text/html"), H2Header("Host", "a.test"), H2Header("User-Agent", "t")]),
            expected: [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "a.test"),
                       H2Header(":path", "/index.html"), H2Header("accept", "text/html"), H2Header("user-agent", "t")]),
        RequestToH2(
            name: "connection-specific and Connection-nominated fields are dropped",
            h1: H1RequestHead(
                method: "POST", target: "/u",
                headers: [H2Header("Host", "a.test"), H2Header("Connection", "keep-alive, X-Trace"),
                          H2Header("Keep-Alive", "timeout=5"), H2Header("X-Trace", "1"),
                          H2Header("Transfer-Encoding", "chunked"), H2Header("Upgrade", "websocket"),
                          H2Header("Proxy-Connection", "keep-alive"), H2Header("TE", "trailers, deflate"),
                          H2Header("Content-Type", "a/b")]),
            expected: [H2Header(":method", "POST"), H2Header(":scheme", "https"), H2Header(":authority", "a.test"),
                       H2Header(":path", "/u"), H2Header("te", "trailers"), H2Header("content-type", "a/b")]),
        RequestToH2(
            name: "absolute-form brings scheme, authority and path",
            h1: H1RequestHead(
                method: "GET", target: "http://b.test:8080/q?x=1", headers: [H2Header("Host", "b.test:8080")]),
            expected: [H2Header(":method", "GET"), H2Header(":scheme", "http"), H2Header(":authority", "b.test:8080"),
                       H2Header(":path", "/q?x=1")]),
        RequestToH2(
            name: "absolute-form without a path gets '/'",
            h1: H1RequestHead(method: "GET", target: "http://b.test", headers: []),
            expected: [H2Header(":method", "GET"), H2Header(":scheme", "http"), H2Header(":authority", "b.test"),
                       H2Header(":path", "/")]),
        RequestToH2(
            name: "CONNECT authority-form",
            h1: H1RequestHead(method: "CONNECT", target: "c.test:443", headers: [H2Header("Host", "c.test:443")]),
            expected: [H2Header(":method", "CONNECT"), H2Header(":authority", "c.test:443")]),
        RequestToH2(
            name: "OPTIONS *",
            h1: H1RequestHead(method: "OPTIONS", target: "*", headers: [H2Header("Host", "a.test")]),
            expected: [H2Header(":method", "OPTIONS"), H2Header(":scheme", "https"), H2Header(":authority", "a.test"),
                       H2Header(":path", "*")]),
    ]

    @Test("HTTP/1.1 request → HTTP/2", arguments: requestsToH2)
    func requestToH2(_ testCase: RequestToH2) throws {
        #expect(try H2HeaderTranslation.h2Request(from: testCase.h1, scheme: "https") == testCase.expected)
    }

    @Test(
        "invalid heads are rejected with a clear error",
        arguments: [
            ([H2Header(":scheme", "https"), H2Header(":path", "/")], H2TranslationError.missingPseudoHeader(":method")),
            ([H2Header(":method", "GET"), H2Header(":authority", "a"), H2Header(":path", "/")],
             .missingPseudoHeader(":scheme")),
            ([H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "a")],
             .missingPseudoHeader(":path")),
            ([H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":path", "/")], .missingHost),
            ([H2Header(":method", "GET"), H2Header(":method", "PUT"), H2Header(":scheme", "https"),
              H2Header(":path", "/")], .duplicatePseudoHeader(":method")),
            ([H2Header(":method", "GET"), H2Header(":status", "200")], .unexpectedPseudoHeader(":status")),
            ([H2Header(":method", "CONNECT")], .missingPseudoHeader(":authority")),
            // RFC 9113 §8.3.1: no userinfo, and a host field must name :authority's host (issue 30, item 8).
            ([H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "user@a.test"),
              H2Header(":path", "/")], .invalidAuthority("user@a.test")),
            ([H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":path", "/"),
              H2Header("host", "a.test, b.test")], .invalidAuthority("a.test, b.test")),
            ([H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", "a.test"),
              H2Header(":path", "/"), H2Header("host", "b.test")], .invalidAuthority("a.test with host b.test")),
            // Only a WebSocket crosses as an extended CONNECT; h2c would hand the origin's connection to HTTP/2
            // nobody parses (item 7).
            ([H2Header(":method", "CONNECT"), H2Header(":protocol", "h2c"), H2Header(":scheme", "https"),
              H2Header(":authority", "a.test"), H2Header(":path", "/")], .unsupportedProtocol("h2c")),
        ])
    func invalidRequests(fields: [H2Header], error: H2TranslationError) {
        #expect(throws: error) { try H2HeaderTranslation.h1Request(from: fields) }
    }

    @Test("HTTP/1 requests that cannot become HTTP/2")
    func invalidH1Requests() {
        #expect(throws: H2TranslationError.missingHost) {
            try H2HeaderTranslation.h2Request(from: H1RequestHead(method: "GET", target: "/", headers: []), scheme: "https")
        }
        #expect(throws: H2TranslationError.invalidTarget("nonsense")) {
            try H2HeaderTranslation.h2Request(
                from: H1RequestHead(method: "GET", target: "nonsense", headers: [H2Header("Host", "a")]), scheme: "https")
        }
    }

    @Test(
        "HTTP/2 response → HTTP/1.1",
        arguments: [
            ([H2Header(":status", "200"), H2Header("content-type", "text/html"), H2Header("set-cookie", "a=1"),
              H2Header("set-cookie", "b=2")],
             H1ResponseHead(
                status: 200, reason: "OK",
                headers: [H2Header("content-type", "text/html"), H2Header("set-cookie", "a=1"),
                          H2Header("set-cookie", "b=2")])),
            ([H2Header(":status", "404"), H2Header("connection", "close"), H2Header("content-length", "0")],
             H1ResponseHead(status: 404, reason: "Not Found", headers: [H2Header("content-length", "0")])),
            ([H2Header(":status", "599")], H1ResponseHead(status: 599, reason: "", headers: [])),
        ])
    func responseToH1(fields: [H2Header], expected: H1ResponseHead) throws {
        #expect(try H2HeaderTranslation.h1Response(from: fields) == expected)
    }

    @Test(
        "invalid responses are rejected",
        arguments: [
            ([H2Header("content-type", "x")], H2TranslationError.missingPseudoHeader(":status")),
            ([H2Header(":status", "20")], .invalidStatus("20")),
            ([H2Header(":status", "abc")], .invalidStatus("abc")),
            ([H2Header(":status", "200"), H2Header(":status", "204")], .duplicatePseudoHeader(":status")),
            ([H2Header(":status", "200"), H2Header(":path", "/")], .unexpectedPseudoHeader(":path")),
        ])
    func invalidResponses(fields: [H2Header], error: H2TranslationError) {
        #expect(throws: error) { try H2HeaderTranslation.h1Response(from: fields) }
    }

    @Test("HTTP/1.1 response → HTTP/2 drops hop-by-hop fields and lowercases names")
    func responseToH2() {
        let head = H1ResponseHead(
            status: 200, reason: "OK",
            headers: [H2Header("Content-Type", "text/plain"), H2Header("Transfer-Encoding", "chunked"),
                      H2Header("Connection", "keep-alive"), H2Header("Keep-Alive", "timeout=5"),
                      H2Header("Set-Cookie", "a=1"), H2Header("Set-Cookie", "b=2")])
        #expect(
            H2HeaderTranslation.h2Response(from: head) == [
                H2Header(":status", "200"), H2Header("content-type", "text/plain"), H2Header("set-cookie", "a=1"),
                H2Header("set-cookie", "b=2"),
            ])
    }

    @Test("a translated request survives the round trip through a real HTTP/2 session")
    func roundTripThroughSessions() throws {
        let original = H1RequestHead(
            method: "GET", target: "/r",
            headers: [H2Header("Host", "a.test"), H2Header("Cookie", "a=1; b=2"), H2Header("Connection", "close"),
                      H2Header("Accept", "*/*")])
        let pair = try SessionPair()
        let id = try pair.client.submitRequest(H2HeaderTranslation.h2Request(from: original, scheme: "https"), body: .none)
        #expect(try pair.exchange())
        let received = try #require(pair.serverEvents.streams()[id]?.heads.first?.fields)
        #expect(
            try H2HeaderTranslation.h1Request(from: received) == H1RequestHead(
                method: "GET", target: "/r",
                headers: [H2Header("host", "a.test"), H2Header("cookie", "a=1; b=2"), H2Header("accept", "*/*")]))
    }

    @Test("An extended CONNECT (RFC 8441) is HTTP/1.1's GET with Upgrade; :protocol elsewhere is refused")
    func extendedConnect() throws {
        let fields = [
            H2Header(":method", "CONNECT"), H2Header(":protocol", "websocket"), H2Header(":scheme", "https"),
            H2Header(":authority", "chat.test"), H2Header(":path", "/ws?room=1"),
            H2Header("sec-websocket-version", "13"),
        ]
        let head = try H2HeaderTranslation.h1Request(from: fields)
        #expect(head.method == "GET")
        #expect(head.target == "/ws?room=1")
        #expect(head.headers.first(named: "host") == "chat.test")
        #expect(head.headers.first(named: "upgrade") == "websocket")
        #expect(head.headers.first(named: "connection") == "Upgrade")
        #expect(head.headers.first(named: "sec-websocket-version") == "13")
        #expect(throws: H2TranslationError.unexpectedPseudoHeader(":protocol")) {
            try H2HeaderTranslation.h1Request(from: [
                H2Header(":method", "GET"), H2Header(":protocol", "websocket"), H2Header(":scheme", "https"),
                H2Header(":authority", "chat.test"), H2Header(":path", "/"),
            ])
        }
    }

    @Test("A header value that is not UTF-8 crosses both ways with its bytes")
    func nonUTF8Value() throws {
        let latin = FieldBytes.string([0x63, 0x61, 0x66, 0xE9])
        let h2 = try H2HeaderTranslation.h2Request(
            from: H1RequestHead(method: "GET", target: "/", headers: [H2Header("Host", "a.test"), H2Header("X-Name", latin)]),
            scheme: "https")
        #expect(h2.first(named: "x-name").map(FieldBytes.bytes) == [0x63, 0x61, 0x66, 0xE9])
        let back = try H2HeaderTranslation.h1Request(from: h2)
        #expect(back.headers.first(named: "x-name").map(FieldBytes.bytes) == [0x63, 0x61, 0x66, 0xE9])
    }
}
