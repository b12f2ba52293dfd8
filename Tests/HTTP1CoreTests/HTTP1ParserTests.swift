import HTTP1Core
import Testing

/// A message stream with the event sequence it must produce, however it is split.
struct Case: CustomTestStringConvertible, Sendable {
    let name: String
    let role: HTTP1Parser.Role
    let wire: String
    var methods: [String] = []
    var eof = false
    let expected: [HTTP1Event]
    var testDescription: String { name }
}

let corpus: [Case] = [
    Case(
        name: "GET keeps header order, case and duplicates", role: .requests,
        wire: "GET /a?b=1 HTTP/1.1\r\nHost: x\r\nX-Dup: 1\r\nx-dup: 2\r\nCookie: c\r\n\r\n",
        expected: [
            .requestHead(
                HTTPRequestHead(
                    method: "GET", target: "/a?b=1",
                    headers: [("Host", "x"), ("X-Dup", "1"), ("x-dup", "2"), ("Cookie", "c")])),
            .end(trailers: []),
        ]),
    Case(
        name: "POST with Content-Length body and OWS around values", role: .requests,
        wire: "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length:  5 \t\r\n\r\nhello",
        expected: [
            .requestHead(
                HTTPRequestHead(method: "POST", target: "/p", headers: [("Host", "x"), ("Content-Length", "5")])),
            .body(bytes("hello")), .end(trailers: []),
        ]),
    Case(
        name: "chunked body with extension and trailers", role: .requests,
        wire: "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            + "5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Sum: 42\r\n\r\n",
        expected: [
            .requestHead(
                HTTPRequestHead(
                    method: "POST", target: "/c", headers: [("Host", "x"), ("Transfer-Encoding", "chunked")])),
            .body(bytes("hello0123456789")), .end(trailers: [("X-Sum", "42")]),
        ]),
    Case(
        name: "pipelined requests with leading empty line", role: .requests,
        wire: "\r\nGET /1 HTTP/1.1\r\nHost: x\r\n\r\nPOST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nokGET /3 HTTP/1.1\r\nHost: x\r\n\r\n",
        expected: [
            .requestHead(HTTPRequestHead(method: "GET", target: "/1", headers: [("Host", "x")])), .end(trailers: []),
            .requestHead(
                HTTPRequestHead(method: "POST", target: "/2", headers: [("Host", "x"), ("Content-Length", "2")])),
            .body(bytes("ok")), .end(trailers: []),
            .requestHead(HTTPRequestHead(method: "GET", target: "/3", headers: [("Host", "x")])), .end(trailers: []),
        ]),
    Case(
        name: "bare LF line endings in the head", role: .requests,
        wire: "GET / HTTP/1.0\nA: b\n\n",
        expected: [
            .requestHead(HTTPRequestHead(method: "GET", target: "/", version: .http1_0, headers: [("A", "b")])),
            .end(trailers: []),
        ]),
    Case(
        name: "absolute-form target as a proxy sees it", role: .requests,
        wire: "GET http://example.com:8080/x?y HTTP/1.1\r\nHost: example.com:8080\r\n\r\n",
        expected: [
            .requestHead(
                HTTPRequestHead(
                    method: "GET", target: "http://example.com:8080/x?y", headers: [("Host", "example.com:8080")])),
            .end(trailers: []),
        ]),
    Case(
        name: "clean close between requests", role: .requests,
        wire: "GET / HTTP/1.1\r\nHost: x\r\n\r\n", eof: true,
        expected: [
            .requestHead(HTTPRequestHead(method: "GET", target: "/", headers: [("Host", "x")])), .end(trailers: []),
            .connectionClosed,
        ]),
    Case(
        name: "response with Content-Length", role: .responses,
        wire: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc", methods: ["GET"],
        expected: [
            .responseHead(HTTPResponseHead(status: 200, reason: "OK", headers: [("Content-Length", "3")])),
            .body(bytes("abc")), .end(trailers: []),
        ]),
    Case(
        name: "response to HEAD has no body despite Content-Length", role: .responses,
        wire: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
        methods: ["HEAD", "GET"],
        expected: [
            .responseHead(HTTPResponseHead(status: 200, reason: "OK", headers: [("Content-Length", "10")])),
            .end(trailers: []),
            .responseHead(HTTPResponseHead(status: 204, reason: "No Content")), .end(trailers: []),
        ]),
    Case(
        name: "304 has no body", role: .responses,
        wire: "HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n", methods: ["GET"],
        expected: [
            .responseHead(
                HTTPResponseHead(status: 304, reason: "Not Modified", headers: [("Content-Length", "99")])),
            .end(trailers: []),
        ]),
    Case(
        name: "100-continue interim head then final response", role: .responses,
        wire: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", methods: ["POST"],
        expected: [
            .responseHead(HTTPResponseHead(status: 100, reason: "Continue")),
            .responseHead(HTTPResponseHead(status: 201, reason: "Created", headers: [("Content-Length", "0")])),
            .end(trailers: []),
        ]),
    Case(
        name: "read-until-close body", role: .responses,
        wire: "HTTP/1.0 200 OK\r\n\r\nstream until the end", methods: ["GET"], eof: true,
        expected: [
            .responseHead(HTTPResponseHead(version: .http1_0, status: 200, reason: "OK")),
            .body(bytes("stream until the end")), .end(trailers: []),
        ]),
    Case(
        name: "status line without reason phrase", role: .responses,
        wire: "HTTP/1.1 204\r\n\r\n", methods: ["GET"],
        expected: [.responseHead(HTTPResponseHead(status: 204)), .end(trailers: [])]),
    Case(
        name: "101 Switching Protocols hands back leftover bytes", role: .responses,
        wire: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n\u{81}\u{05}hello",
        methods: ["GET"],
        expected: [
            .responseHead(
                HTTPResponseHead(
                    status: 101, reason: "Switching Protocols",
                    headers: [("Upgrade", "websocket"), ("Connection", "Upgrade")])),
            .switchedProtocols(leftover: bytes("\u{81}\u{05}hello")),
        ]),
    Case(
        name: "2xx to CONNECT turns into a tunnel", role: .responses,
        wire: "HTTP/1.1 200 Connection established\r\n\r\n\u{16}\u{03}\u{01}", methods: ["CONNECT"],
        expected: [
            .responseHead(HTTPResponseHead(status: 200, reason: "Connection established")),
            .switchedProtocols(leftover: bytes("\u{16}\u{03}\u{01}")),
        ]),
    Case(
        name: "chunked response followed by a pipelined response", role: .responses,
        wire: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            + "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nz",
        methods: ["GET", "GET"],
        expected: [
            .responseHead(HTTPResponseHead(status: 200, reason: "OK", headers: [("Transfer-Encoding", "chunked")])),
            .body(bytes("abc")), .end(trailers: []),
            .responseHead(HTTPResponseHead(status: 200, reason: "OK", headers: [("Content-Length", "1")])),
            .body(bytes("z")), .end(trailers: []),
        ]),
]

@Suite("HTTP1Parser events")
struct HTTP1ParserEventTests {
    @Test("whole stream yields the expected events", arguments: corpus)
    func wholeStream(_ c: Case) {
        let outcome = parse([bytes(c.wire)], role: c.role, methods: c.methods, eof: c.eof)
        #expect(outcome == ParseOutcome(events: c.expected, error: nil))
    }

    @Test("splitting the stream at any byte boundary changes nothing", arguments: corpus)
    func everySplit(_ c: Case) {
        let data = bytes(c.wire)
        for split in splits(of: data) {
            let outcome = parse(split, role: c.role, methods: c.methods, eof: c.eof)
            #expect(outcome == ParseOutcome(events: c.expected, error: nil), "split \(split.map(\.count))")
        }
    }

    @Test func pausesAfterEachMessageUntilTheOwnerContinues() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n"))
        guard case .requestHead(let first) = try parser.nextEvent() else {
            Issue.record("expected a head")
            return
        }
        #expect(first.target == "/1")
        #expect(try parser.nextEvent() == .end(trailers: []))
        #expect(try parser.nextEvent() == .paused)
        #expect(try parser.nextEvent() == .paused)
        try parser.startNextMessage()
        guard case .requestHead(let second) = try parser.nextEvent() else {
            Issue.record("expected the pipelined head")
            return
        }
        #expect(second.target == "/2")
    }

    @Test func connectionCloseForbidsAnotherMessage() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
        _ = try parser.nextEvent()
        _ = try parser.nextEvent()
        #expect(!parser.lastMessageKeepAlive)
        #expect(try parser.nextEvent() == .paused)
        #expect(throws: HTTP1Error.self) { try parser.startNextMessage() }
    }

    @Test func connectRequestSwitchesToTunnelWithLeftover() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n\u{16}\u{03}\u{01}"))
        #expect(
            try parser.nextEvent()
                == .requestHead(
                    HTTPRequestHead(method: "CONNECT", target: "example.com:443", headers: [("Host", "example.com:443")])
                ))
        #expect(try parser.nextEvent() == .end(trailers: []))
        #expect(try parser.nextEvent() == .paused)
        #expect(try parser.switchProtocols() == bytes("\u{16}\u{03}\u{01}"))
        parser.receive([0x17])
        #expect(try parser.nextEvent() == .switchedProtocols(leftover: [0x17]))
    }

    @Test func refusedUpgradeContinuesAsHTTP() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: h2c\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n"))
        _ = try parser.nextEvent()
        _ = try parser.nextEvent()
        try parser.startNextMessage()
        #expect(
            try parser.nextEvent() == .requestHead(HTTPRequestHead(method: "GET", target: "/next", headers: [("Host", "x")])))
    }

    @Test func switchProtocolsIsRefusedForPlainRequests() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        _ = try parser.nextEvent()
        _ = try parser.nextEvent()
        #expect(throws: HTTP1Error.self) { _ = try parser.switchProtocols() }
    }

    @Test func expectContinueIsVisibleOnTheHead() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("PUT /u HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"))
        guard case .requestHead(let head) = try parser.nextEvent() else {
            Issue.record("expected a head")
            return
        }
        #expect(head.expectsContinue)
        #expect(try parser.nextEvent() == .needMoreData)
        parser.receive(bytes("ok"))
        #expect(try parser.nextEvent() == .body(bytes("ok")))
    }

    @Test func bodiesStreamWithoutWaitingForTheWholeMessage() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nabc"))
        _ = try parser.nextEvent()
        #expect(try parser.nextEvent() == .body(bytes("abc")))
        #expect(try parser.nextEvent() == .needMoreData)
    }

    @Test func errorsAreSticky() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("GET / HTTP/2.0\r\n\r\n"))
        #expect(throws: HTTP1Error.self) { _ = try parser.nextEvent() }
        parser.receive(bytes("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
        #expect(throws: HTTP1Error.self) { _ = try parser.nextEvent() }
    }
}
