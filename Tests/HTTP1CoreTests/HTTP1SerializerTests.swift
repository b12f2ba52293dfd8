import HTTP1Core
import Testing

@Suite("HTTP1Serializer and round trips")
struct HTTP1SerializerTests {
    @Test func requestHeadBytes() throws {
        var out: [UInt8] = []
        try HTTP1Serializer.write(
            HTTPRequestHead(method: "GET", target: "/x", headers: [("Host", "h"), ("a", "1")]), into: &out)
        #expect(out == bytes("GET /x HTTP/1.1\r\nHost: h\r\na: 1\r\n\r\n"))
    }

    @Test func responseHeadBytes() throws {
        var out: [UInt8] = []
        try HTTP1Serializer.write(HTTPResponseHead(version: .http1_0, status: 404, reason: "Not Found"), into: &out)
        #expect(out == bytes("HTTP/1.0 404 Not Found\r\n\r\n"))
    }

    @Test("HTTP/1.0 is written as 1.0, a later 1.x as our own 1.1, and another major version is refused")
    func versionWritten() throws {
        var out: [UInt8] = []
        try HTTP1Serializer.write(HTTPResponseHead(version: HTTPVersion(major: 1, minor: 9), status: 204, reason: "No Content"), into: &out)
        #expect(out == bytes("HTTP/1.1 204 No Content\r\n\r\n"))
        #expect(throws: HTTP1Error.self) {
            var refused: [UInt8] = []
            try HTTP1Serializer.write(HTTPResponseHead(version: HTTPVersion(major: 2, minor: 0), status: 204), into: &refused)
        }
    }

    @Test func chunkedEncoderOutput() throws {
        var writer = HTTP1BodyWriter(framing: .chunked)
        var out: [UInt8] = []
        try writer.write(bytes("0123456789abcdef!"), into: &out)
        try writer.write([], into: &out)
        try writer.finish(trailers: [("X-T", "1")], into: &out)
        #expect(out == bytes("11\r\n0123456789abcdef!\r\n0\r\nX-T: 1\r\n\r\n"))
    }

    @Test("header injection is refused", arguments: [("X", "a\r\nEvil: 1"), ("Bad Name", "v"), ("", "v")])
    func refusesInjection(name: String, value: String) {
        var out: [UInt8] = []
        #expect(throws: HTTP1Error.self) {
            try HTTP1Serializer.write(HTTPResponseHead(status: 200, headers: [(name, value)]), into: &out)
        }
    }

    @Test func contentLengthIsEnforced() throws {
        var out: [UInt8] = []
        var over = HTTP1BodyWriter(framing: .contentLength(3))
        #expect(throws: HTTP1Error.self) { try over.write(bytes("abcd"), into: &out) }
        var under = HTTP1BodyWriter(framing: .contentLength(3))
        try under.write(bytes("ab"), into: &out)
        #expect(throws: HTTP1Error.self) { try under.finish(into: &out) }
        var none = HTTP1BodyWriter(framing: .none)
        #expect(throws: HTTP1Error.self) { try none.write(bytes("x"), into: &out) }
    }

    @Test("an array piece written into an empty output is taken whole, and still counted and checked")
    func arrayPiecesIntoEmptyOutput() throws {
        var length = HTTP1BodyWriter(framing: .contentLength(6))
        var out: [UInt8] = []
        try length.write(bytes("abc"), into: &out)
        try length.write(bytes("def"), into: &out)
        #expect(out == bytes("abcdef"))
        try length.finish(into: &out)
        #expect(throws: HTTP1Error.self) { try length.write(bytes("g"), into: &out) }

        var short = HTTP1BodyWriter(framing: .contentLength(6))
        out = []
        try short.write(bytes("abc"), into: &out)
        #expect(throws: HTTP1Error.self) { try short.finish(into: &out) }

        var afterFinish = HTTP1BodyWriter(framing: .untilClose)
        out = []
        try afterFinish.write(bytes("raw"), into: &out)
        #expect(out == bytes("raw"))
        try afterFinish.finish(into: &out)
        out = []
        #expect(throws: HTTP1Error.self) { try afterFinish.write(bytes("more"), into: &out) }

        var chunked = HTTP1BodyWriter(framing: .chunked)
        out = []
        try chunked.write(bytes("abc"), into: &out)
        #expect(out == bytes("3\r\nabc\r\n"))
    }

    /// Request messages: head, body pieces, trailers.
    static let requests: [(HTTPRequestHead, [String], HTTPHeaders)] = [
        (HTTPRequestHead(method: "GET", target: "/", headers: [("Host", "a")]), [], []),
        (
            HTTPRequestHead(
                method: "POST", target: "http://h:1/p?q", headers: [("Host", "h:1"), ("Content-Length", "11")]),
            ["hello", " world"], []
        ),
        (
            HTTPRequestHead(
                method: "PUT", target: "/u", version: .http1_1,
                headers: [("Host", "a"), ("Transfer-Encoding", "chunked"), ("X-Uni", "välue")]),
            ["a", "", String(repeating: "z", count: 300)], [("Digest", "x"), ("digest", "y")]
        ),
        (HTTPRequestHead(method: "OPTIONS", target: "*", version: .http1_0, headers: [("A", "")]), [], []),
    ]

    @Test("parse(serialize(request)) gives back the request", arguments: requests.indices)
    func requestRoundTrip(index: Int) throws {
        let (head, pieces, trailers) = Self.requests[index]
        var out: [UInt8] = []
        try HTTP1Serializer.write(head, into: &out)
        var writer = HTTP1BodyWriter(framing: try HTTP1Framing.forRequest(head))
        for piece in pieces { try writer.write(bytes(piece), into: &out) }
        try writer.finish(trailers: trailers, into: &out)
        let body = pieces.joined()
        var expected: [HTTP1Event] = [.requestHead(head)]
        if !body.isEmpty { expected.append(.body(bytes(body))) }
        expected.append(.end(trailers: trailers))
        #expect(parse([out], role: .requests) == ParseOutcome(events: expected))
    }

    @Test func responseRoundTripReframesUntilCloseAsChunked() throws {
        // A proxy receives a read-until-close body and relays it chunked to a keep-alive client.
        let upstream = parse(
            [bytes("HTTP/1.0 200 OK\r\nServer: s\r\n\r\npart one, part two")], role: .responses, methods: ["GET"],
            eof: true)
        guard case .responseHead(var head)? = upstream.events.first, case .body(let body) = upstream.events[1] else {
            Issue.record("unexpected upstream events \(upstream)")
            return
        }
        head.version = .http1_1
        head.headers.add(name: "Transfer-Encoding", value: "chunked")
        var out: [UInt8] = []
        try HTTP1Serializer.write(head, into: &out)
        var writer = HTTP1BodyWriter(framing: try HTTP1Framing.forResponse(head, requestMethod: "GET"))
        try writer.write(body, into: &out)
        try writer.finish(into: &out)
        let client = parse([out], role: .responses, methods: ["GET"])
        #expect(client.events == [.responseHead(head), .body(body), .end(trailers: [])])
    }

    @Test("keep-alive rules", arguments: [
        (HTTPVersion.http1_1, "", true), (.http1_1, "close", false), (.http1_1, "Keep-Alive, Close", false),
        (.http1_0, "", false), (.http1_0, "keep-alive", true),
    ])
    func keepAlive(version: HTTPVersion, connection: String, expected: Bool) {
        let headers: HTTPHeaders = connection.isEmpty ? [] : [("Connection", connection)]
        #expect(HTTP1Framing.keepAlive(version: version, headers: headers) == expected)
    }
}

@Suite("HTTPRequestTarget")
struct HTTPRequestTargetTests {
    @Test("forms", arguments: [
        ("GET", "/a/b?c", HTTPRequestTarget.origin(pathAndQuery: "/a/b?c")),
        ("GET", "http://Example.com:8080/x?y#frag", .absolute(scheme: "http", host: "Example.com", port: 8080, pathAndQuery: "/x?y")),
        ("GET", "https://example.com", .absolute(scheme: "https", host: "example.com", port: nil, pathAndQuery: "/")),
        ("GET", "http://[::1]:81?q", .absolute(scheme: "http", host: "::1", port: 81, pathAndQuery: "/?q")),
        ("GET", "HTTP://[::1]/p", .absolute(scheme: "http", host: "::1", port: nil, pathAndQuery: "/p")),
        ("GET", "http://x.test#f", .absolute(scheme: "http", host: "x.test", port: nil, pathAndQuery: "/")),
        ("GET", "http://x.test?q=a:b//c#f", .absolute(scheme: "http", host: "x.test", port: nil, pathAndQuery: "/?q=a:b//c")),
        ("CONNECT", "example.com:443", .authority(host: "example.com", port: 443)),
        ("CONNECT", "[2001:db8::1]:8443", .authority(host: "2001:db8::1", port: 8443)),
        ("OPTIONS", "*", .asterisk),
    ])
    func parses(method: String, target: String, expected: HTTPRequestTarget) throws {
        #expect(try HTTPRequestTarget(parsing: target, method: method) == expected)
    }

    @Test("rejects", arguments: [
        ("CONNECT", "example.com"), ("CONNECT", "example.com:99999"), ("CONNECT", "/path"), ("GET", "*"),
        ("GET", "example.com/x"), ("GET", "http://user@host/"), ("GET", "http://:80/"), ("GET", "http://a:b:c/"),
        ("GET", "h_t://x/"), ("GET", "://x/"), ("GET", "http://[::1/"), ("GET", "http://[::1]x/"),
    ])
    func rejects(method: String, target: String) {
        #expect(throws: HTTP1Error.self) { try HTTPRequestTarget(parsing: target, method: method) }
    }
}
