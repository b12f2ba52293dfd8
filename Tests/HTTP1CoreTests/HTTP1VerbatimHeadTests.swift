import HTTP1Core
import Testing

/// The parser's wire form of a head (`lastHeadBytes`, `lastBodyFraming`) and the serializer's splice, which together
/// let a proxy relay a head it does not change as the bytes it received.
@Suite("Verbatim heads: raw bytes, framing, annotation splice")
struct HTTP1VerbatimHeadTests {
    /// Parses one head from `wire` and returns the event, the raw bytes and the framing right after it.
    private func firstHead(_ wire: String, role: HTTP1Parser.Role, method: String = "GET") throws
        -> (event: HTTP1Event, raw: [UInt8]?, framing: HTTP1BodyFraming, parser: HTTP1Parser)
    {
        var parser = HTTP1Parser(role: role)
        if role == .responses { parser.expectResponse(toRequestMethod: method) }
        parser.receive(bytes(wire))
        let event = try parser.nextEvent()
        return (event, parser.lastHeadBytes.map(Array.init), parser.lastBodyFraming, parser)
    }

    @Test("A canonical request head is exposed byte for byte, peer spelling included")
    func requestHeadBytes() throws {
        let head = "POST /p?q=1 HTTP/1.1\r\nHost: a.test\r\nx-odd:no-space  \r\nContent-Length: 3\r\n\r\n"
        let r = try firstHead("\r\n" + head + "abc", role: .requests)
        guard case .requestHead = r.event else {
            Issue.record("expected a request head, got \(r.event)")
            return
        }
        // The empty line before the request line (RFC 9112 §2.2) is not part of the head.
        #expect(r.raw == bytes(head))
        #expect(r.framing == .contentLength(3))
    }

    @Test("appendLines gives each field as `\\r\\nName: value` in order, from parsed and from built headers alike")
    func appendLines() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("GET / HTTP/1.1\r\nHost: a.test\r\nx-odd:no-space  \r\nX-A: 1\r\nX-A:  2\r\n\r\n"))
        guard case .requestHead(let head) = try parser.nextEvent() else {
            Issue.record("expected a request head")
            return
        }
        let want = bytes("\r\nHost: a.test\r\nx-odd: no-space\r\nX-A: 1\r\nX-A: 2")
        var parsed: [UInt8] = [9]
        head.headers.appendLines(to: &parsed)
        #expect(parsed == [9] + want, "appended after what the buffer held")
        var built: [UInt8] = [9]
        HTTPHeaders(head.headers.fields.map { ($0.name, $0.value) }).appendLines(to: &built)
        #expect(built == parsed)
        var none: [UInt8] = []
        HTTPHeaders().appendLines(to: &none)
        #expect(none.isEmpty)
    }

    @Test("appendLines copies a head already in line form in one piece, and gives the same lines as field by field",
          arguments: [
            "GET / HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\nUser-Agent: curl/7.88.1\r\n\r\n",  // line form
            "GET / HTTP/1.1\r\nHost: a.test\r\nX-Empty: \r\nAccept: */*\r\n\r\n",  // an empty value
            "GET / HTTP/1.1\r\nHost: a.test\nAccept: */*\r\n\r\n",  // a bare LF between fields
            "GET / HTTP/1.1\r\nHost:a.test\r\nAccept: */*\r\n\r\n",  // no space after the colon
            "GET / HTTP/1.1\r\nHost: a.test \r\nAccept: */*\r\n\r\n",  // trailing whitespace
            "GET / HTTP/1.1\r\nHost:  a.test\r\n\r\n",  // two spaces
            "GET / HTTP/1.1\r\nX-Long: 0123456789abcdef0123456789abcdef\r\nHost: a\r\n\r\n",  // many 8-byte words
          ])
    func lineFormCopy(_ text: String) throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes(text))
        guard case .requestHead(let head) = try parser.nextEvent() else {
            Issue.record("expected a request head")
            return
        }
        var parsed: [UInt8] = []
        head.headers.appendLines(to: &parsed)
        var built: [UInt8] = []
        HTTPHeaders(head.headers.fields.map { ($0.name, $0.value) }).appendLines(to: &built)
        #expect(String(decoding: parsed, as: UTF8.self) == String(decoding: built, as: UTF8.self))
    }

    @Test("Bytes that are not UTF-8 stay as received, and serialising the parsed head gives them back too")
    func obsTextIsKept() throws {
        var wire = bytes("GET / HTTP/1.1\r\nHost: a\r\nX-Latin: caf")
        wire.append(0xE9)
        wire += bytes("\r\n\r\n")
        var parser = HTTP1Parser(role: .requests)
        parser.receive(wire)
        guard case .requestHead(let head) = try parser.nextEvent() else {
            Issue.record("expected a request head")
            return
        }
        #expect(parser.lastHeadBytes.map(Array.init) == wire)
        var reserialised: [UInt8] = []
        try HTTP1Serializer.write(head, into: &reserialised)
        #expect(reserialised == wire)
        #expect(FieldBytes.display(head.headers.values(for: "X-Latin").first ?? "") == "caf\u{E9}")
        // The capture's text form is valid UTF-8 holding the escaped value, the same from parsed or built headers.
        var lines: [UInt8] = []
        head.headers.appendLines(to: &lines)
        let text = try #require(String(validating: lines, as: UTF8.self))
        #expect(text == "\r\nHost: a\r\nX-Latin: " + FieldBytes.string(bytes("caf") + [0xE9]))
        var built: [UInt8] = []
        HTTPHeaders(head.headers.fields.map { ($0.name, $0.value) }).appendLines(to: &built)
        #expect(built == lines)
    }

    @Test("Heads not in canonical form have no raw bytes, so a proxy serialises them again",
          arguments: [
            "GET / HTTP/1.1\nHost: a\r\n\r\n",  // bare LF after the request line
            "GET / HTTP/1.1\r\nHost: a\n\r\n",  // bare LF after a field
            "GET / HTTP/1.1\r\nHost: a\r\n\n",  // bare LF as the empty line
            "GET / HTTP/1.2\r\nHost: a\r\n\r\n",  // a later minor version, which a proxy sends as its own 1.1
          ])
    func nonCanonical(wire: String) throws {
        let r = try firstHead(wire, role: .requests)
        guard case .requestHead = r.event else {
            Issue.record("expected a request head, got \(r.event)")
            return
        }
        #expect(r.raw == nil)
    }

    @Test("The raw bytes belong to the head just returned: the next event clears them")
    func clearedByNextEvent() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nok"))
        _ = try parser.nextEvent()
        #expect(parser.lastHeadBytes != nil)
        #expect(try parser.nextEvent() == .body(bytes("ok")))
        #expect(parser.lastHeadBytes == nil)
    }

    @Test("Responses: an interim head has raw bytes too; the final head carries the framing for the request method")
    func responses() throws {
        var parser = HTTP1Parser(role: .responses)
        parser.expectResponse(toRequestMethod: "HEAD")
        let interim = "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
        let final = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"
        parser.receive(bytes(interim + final))
        _ = try parser.nextEvent()
        #expect(parser.lastHeadBytes.map(Array.init) == bytes(interim))
        _ = try parser.nextEvent()
        #expect(parser.lastHeadBytes.map(Array.init) == bytes(final))
        // A response to HEAD has no body whatever its Content-Length says.
        #expect(parser.lastBodyFraming == HTTP1BodyFraming.none)
        let chunked = try firstHead("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", role: .responses)
        #expect(chunked.framing == .chunked)
        let untilClose = try firstHead("HTTP/1.0 200 OK\r\nServer: s\r\n\r\n", role: .responses)
        #expect(untilClose.framing == .untilClose)
    }

    @Test("Content-Length: one field with one number; lists and repeats are refused; 18 digits is the most accepted")
    func contentLengthLists() throws {
        // Equal repeats too: the head is relayed as received, and a next hop may read either copy.
        for wire in ["Content-Length: 7 ,7", "Content-Length: 7\r\nContent-Length: 7", "Content-Length: ,7,"] {
            #expect(throws: HTTP1Error.self) {
                _ = try firstHead("HTTP/1.1 200 OK\r\n\(wire)\r\n\r\n", role: .responses)
            }
        }
        let padded = try firstHead("HTTP/1.1 200 OK\r\nContent-Length: \t7 \r\n\r\n", role: .responses)
        #expect(padded.framing == .contentLength(7))
        let long = try firstHead("HTTP/1.1 200 OK\r\nContent-Length: 000000000000000012\r\n\r\n", role: .responses)
        #expect(long.framing == .contentLength(12))
        #expect(throws: HTTP1Error.self) {
            _ = try firstHead("HTTP/1.1 200 OK\r\nContent-Length: 0000000000000000012\r\n\r\n", role: .responses)
        }
        #expect(throws: HTTP1Error.self) {
            _ = try firstHead("HTTP/1.1 200 OK\r\nContent-Length: , ,\r\n\r\n", role: .responses)
        }
    }

    @Test("Splicing fields into a raw head: the received bytes, the new fields, the empty line")
    func splice() throws {
        let raw = bytes("HTTP/1.1 200 OK\r\nServer:nginx\r\nContent-Length: 0\r\n\r\n")
        var out = bytes("earlier")
        try HTTP1Serializer.write(rawHead: raw[...], adding: [("X-ATS-Verdict", "allowed"), ("X-B", "")], into: &out)
        #expect(out == bytes("earlierHTTP/1.1 200 OK\r\nServer:nginx\r\nContent-Length: 0\r\nX-ATS-Verdict: allowed\r\nX-B: \r\n\r\n"))
        var plain: [UInt8] = []
        try HTTP1Serializer.write(rawHead: raw[...], adding: [], into: &plain)
        #expect(plain == raw)
    }

    @Test("A splice refuses injected lines and raw bytes that are no head, appending nothing")
    func spliceRefuses() {
        let raw = bytes("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        var out = bytes("kept")
        #expect(throws: HTTP1Error.self) {
            try HTTP1Serializer.write(rawHead: raw[...], adding: [("X-Ok", "1"), ("X", "a\r\nEvil: 1")], into: &out)
        }
        #expect(throws: HTTP1Error.self) {
            try HTTP1Serializer.write(rawHead: raw.dropLast(2), adding: [], into: &out)
        }
        #expect(out == bytes("kept"))
    }

    @Test("Parsed headers answer lookups from their bytes, and become ordinary fields once changed")
    func wireHeaders() throws {
        var parser = HTTP1Parser(role: .requests)
        parser.receive(bytes("GET / HTTP/1.1\r\nHost: a\r\nconnection: Keep-Alive ,  Upgrade\r\nX-Multi: 1\r\n"
            + "Upgrade: h2c\r\nx-multi:  2 \r\n\r\n"))
        guard case .requestHead(let head) = try parser.nextEvent() else {
            Issue.record("expected a request head")
            return
        }
        var headers = head.headers
        #expect(headers.count == 5)
        #expect(headers[first: "X-MULTI"] == "1")
        #expect(headers.values(for: "x-multi") == ["1", "2"])
        #expect(headers.count(of: "X-Multi") == 2)
        #expect(headers.containsToken("upgrade", for: "Connection"))
        #expect(!headers.containsToken("close", for: "Connection"))
        #expect(headers.listTokens(for: "Connection") == ["keep-alive", "upgrade"])
        #expect(headers == HTTPHeaders([
            ("Host", "a"), ("connection", "Keep-Alive ,  Upgrade"), ("X-Multi", "1"), ("Upgrade", "h2c"), ("x-multi", "2"),
        ]))
        headers.remove(name: "x-multi")
        headers.add(name: "Via", value: "1.1 atsproxy")
        #expect(headers.fields.map(\.name) == ["Host", "connection", "Upgrade", "Via"])
        #expect(headers != head.headers)
        #expect(head.headers.count == 5, "the parsed head is a value: changing a copy leaves it alone")
    }
}
