import HTTP1Core
import Testing

/// A stream the parser must reject, with who is at fault, why, and the status a server should answer.
struct BadCase: CustomTestStringConvertible, Sendable {
    let name: String
    var role: HTTP1Parser.Role = .requests
    let wire: String
    var methods: [String] = []
    var eof = false
    let reason: HTTP1Error.Reason
    let status: Int
    var testDescription: String { name }
}

let badCorpus: [BadCase] = [
    // Request smuggling defences (RFC 9112 §6.3).
    BadCase(
        name: "Content-Length and Transfer-Encoding together",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        reason: .contentLengthWithTransferEncoding, status: 400),
    BadCase(
        name: "differing duplicate Content-Length",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        reason: .conflictingContentLength, status: 400),
    BadCase(
        name: "differing Content-Length list", wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3, 4\r\n\r\n",
        reason: .conflictingContentLength, status: 400),
    // Ambiguous framing that a next hop could read differently (issue: smuggling through Content-Length).
    BadCase(
        name: "Content-Length then an empty Content-Length",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length:\r\n\r\nok",
        reason: .conflictingContentLength, status: 400),
    BadCase(
        name: "an empty Content-Length then Content-Length",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: \r\nContent-Length: 2\r\n\r\nok",
        reason: .invalidContentLength, status: 400),
    BadCase(
        name: "a list of identical Content-Length values",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2,2\r\n\r\nok",
        reason: .conflictingContentLength, status: 400),
    BadCase(
        name: "identical duplicate Content-Length fields",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
        reason: .conflictingContentLength, status: 400),
    BadCase(
        name: "a Content-Length list with an empty element",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2,\r\n\r\nok",
        reason: .conflictingContentLength, status: 400),
    BadCase(
        name: "response with Content-Length and an empty Content-Length", role: .responses,
        wire: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length:\r\n\r\nok", methods: ["GET"],
        reason: .conflictingContentLength, status: 502),
    BadCase(
        name: "response with a list of identical Content-Length values", role: .responses,
        wire: "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok", methods: ["GET"],
        reason: .conflictingContentLength, status: 502),
    BadCase(
        name: "signed Content-Length", wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\nabc",
        reason: .invalidContentLength, status: 400),
    BadCase(
        name: "Transfer-Encoding not ending in chunked",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        reason: .unsupportedTransferEncoding, status: 501),
    BadCase(
        name: "chunked applied twice",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        reason: .unsupportedTransferEncoding, status: 501),
    BadCase(
        name: "Transfer-Encoding in HTTP/1.0",
        wire: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        reason: .transferEncodingInHTTP10, status: 400),
    BadCase(
        name: "obs-fold continuation line", wire: "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n  folded\r\n\r\n",
        reason: .obsoleteLineFolding, status: 400),
    BadCase(
        name: "whitespace before colon", wire: "GET / HTTP/1.1\r\nHost: x\r\nContent-Length : 0\r\n\r\n",
        reason: .whitespaceBeforeColon, status: 400),
    BadCase(
        name: "chunk size overflow",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFF\r\n",
        reason: .chunkSizeOverflow, status: 400),
    BadCase(
        name: "chunk size not hex", wire: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        reason: .invalidChunkSize, status: 400),
    BadCase(
        name: "chunk size line with bare LF",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
        reason: .invalidChunkSize, status: 400),
    BadCase(
        name: "chunk data without CRLF",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
        reason: .invalidChunkTerminator, status: 400),
    BadCase(
        name: "NUL in a header value", wire: "GET / HTTP/1.1\r\nHost: x\r\nX: a\u{0}b\r\n\r\n",
        reason: .invalidHeaderValue, status: 400),
    BadCase(
        name: "space in a header name", wire: "GET / HTTP/1.1\r\nHost: x\r\nBad Name: a\r\n\r\n",
        reason: .invalidHeaderName, status: 400),
    BadCase(name: "HTTP/2.0 version", wire: "GET / HTTP/2.0\r\n\r\n", reason: .unsupportedVersion, status: 505),
    BadCase(name: "HTTP/0.9 request line", wire: "GET /\r\n\r\n", reason: .invalidStartLine, status: 400),
    BadCase(name: "invalid method", wire: "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", reason: .invalidMethod, status: 400),
    BadCase(name: "missing Host in HTTP/1.1", wire: "GET / HTTP/1.1\r\n\r\n", reason: .invalidHeaderValue, status: 400),
    BadCase(
        name: "two Host fields", wire: "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", reason: .invalidHeaderValue,
        status: 400),
    // Hosts and codings a next hop could read differently (issue 30, items 8 and 9).
    BadCase(
        name: "a Host list", wire: "GET / HTTP/1.1\r\nHost: h1.test, evil.test\r\n\r\n", reason: .invalidHeaderValue,
        status: 400),
    BadCase(
        name: "a Host with userinfo", wire: "GET / HTTP/1.1\r\nHost: user@h1.test\r\n\r\n", reason: .invalidHeaderValue,
        status: 400),
    BadCase(
        name: "a Host with an empty port", wire: "GET / HTTP/1.0\r\nHost: h1.test:x\r\n\r\n",
        reason: .invalidHeaderValue, status: 400),
    BadCase(
        name: "identity before chunked",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity, chunked\r\n\r\n0\r\n\r\n",
        reason: .unsupportedTransferEncoding, status: 501),
    BadCase(
        name: "gzip before chunked",
        wire: "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        reason: .unsupportedTransferEncoding, status: 501),
    BadCase(
        name: "a response coded gzip before chunked", role: .responses,
        wire: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", methods: ["GET"],
        reason: .unsupportedTransferEncoding, status: 502),
    BadCase(
        name: "CONNECT without a port", wire: "CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n",
        reason: .invalidTarget, status: 400),
    BadCase(
        name: "EOF inside a Content-Length body", wire: "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nabc",
        eof: true, reason: .incompleteMessage, status: 400),
    BadCase(
        name: "EOF inside a head", wire: "GET / HTTP/1.1\r\nHo", eof: true, reason: .incompleteMessage, status: 400),
    BadCase(
        name: "response with no request outstanding", role: .responses, wire: "HTTP/1.1 200 OK\r\n\r\n",
        reason: .unexpectedData, status: 502),
    BadCase(
        name: "upstream smuggling attempt reports 502", role: .responses,
        wire: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", methods: ["GET"],
        reason: .contentLengthWithTransferEncoding, status: 502),
    BadCase(
        name: "two-digit status", role: .responses, wire: "HTTP/1.1 20 OK\r\n\r\n", methods: ["GET"],
        reason: .invalidStatus, status: 502),
]

@Suite("HTTP1Parser rejects bad input")
struct HTTP1ParserErrorTests {
    @Test("remote protocol error with reason and status", arguments: badCorpus)
    func rejects(_ c: BadCase) {
        let outcome = parse([bytes(c.wire)], role: c.role, methods: c.methods, eof: c.eof)
        #expect(outcome.error?.side == .remote)
        #expect(outcome.error?.reason == c.reason)
        #expect(outcome.error?.suggestedStatus == c.status)
    }

    @Test("the verdict does not depend on how the bytes are split", arguments: badCorpus)
    func rejectsAtEverySplit(_ c: BadCase) {
        for split in splits(of: bytes(c.wire)) {
            let outcome = parse(split, role: c.role, methods: c.methods, eof: c.eof)
            #expect(outcome.error?.reason == c.reason, "split \(split.map(\.count))")
        }
    }

    /// Latin-1 bytes in a target were turned into UTF-8 on the way out (0xFF became C3 BF): a different target
    /// than the client sent. They are refused; UTF-8 targets pass byte for byte.
    @Test func requestTargetBytesThatAreNotUTF8AreRefused() {
        for raw: [UInt8] in [[0xFF], [0x80], [0xC3]] {
            let wire = bytes("GET /p") + raw + bytes("65 HTTP/1.1\r\nHost: x\r\n\r\n")
            let outcome = parse([wire], role: .requests)
            #expect(outcome.error?.reason == .invalidTarget, "\(raw)")
            #expect(outcome.error?.suggestedStatus == 400)
        }
        let utf8 = parse([bytes("GET /caf\u{E9} HTTP/1.1\r\nHost: x\r\n\r\n")], role: .requests)
        #expect(utf8.error == nil)
    }

    @Test func headerSectionLimitGives431() {
        var limits = HTTP1Limits()
        limits.maxHeaderSectionBytes = 1024
        let big = "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "a", count: 2000) + "\r\n\r\n"
        let complete = parse([bytes(big)], role: .requests, limits: limits)
        #expect(complete.error?.reason == .headerSectionTooLarge)
        #expect(complete.error?.suggestedStatus == 431)
        // Without the terminating empty line the parser must still stop buffering at the limit.
        let endless = parse([bytes(String(big.dropLast(4)))], role: .requests, limits: limits)
        #expect(endless.error?.reason == .headerSectionTooLarge)
    }

    @Test func headerCountLimitGives431() {
        var limits = HTTP1Limits()
        limits.maxHeaderCount = 10
        let fields = (0..<11).map { "X-\($0): v\r\n" }.joined()
        let outcome = parse([bytes("GET / HTTP/1.1\r\nHost: x\r\n" + fields + "\r\n")], role: .requests, limits: limits)
        #expect(outcome.error?.reason == .tooManyHeaders)
        #expect(outcome.error?.suggestedStatus == 431)
    }

    @Test func longRequestLineGives414() {
        var limits = HTTP1Limits()
        limits.maxStartLineBytes = 100
        let line = "GET /" + String(repeating: "a", count: 200)
        let unterminated = parse([bytes(line)], role: .requests, limits: limits)
        #expect(unterminated.error?.reason == .startLineTooLong)
        #expect(unterminated.error?.suggestedStatus == 414)
        let terminated = parse([bytes(line + " HTTP/1.1\r\nHost: x\r\n\r\n")], role: .requests, limits: limits)
        #expect(terminated.error?.reason == .startLineTooLong)
    }

    @Test("A start line of exactly the limit passes even a byte at a time, its CR and LF included; one more is 414")
    func startLineAtTheLimitByteByByte() {
        var limits = HTTP1Limits()
        limits.maxStartLineBytes = 100
        let target = "/" + String(repeating: "a", count: 100 - "GET  HTTP/1.1".count - 1)
        let atLimit = "GET \(target) HTTP/1.1"
        #expect(atLimit.utf8.count == 100)
        let head = bytes(atLimit + "\r\nHost: x\r\n\r\n")
        let whole = parse([head], role: .requests, limits: limits)
        #expect(whole.error == nil && whole.events.count == 2)  // the head and its end
        #expect(parse(head.map { [$0] }, role: .requests, limits: limits) == whole)
        let over = bytes("GET \(target)a HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(parse(over.map { [$0] }, role: .requests, limits: limits).error?.reason == .startLineTooLong)
    }

    @Test func declaredBodyOverLimitGives413() {
        var limits = HTTP1Limits()
        limits.maxBodyBytes = 10
        let outcome = parse(
            [bytes("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n")], role: .requests, limits: limits)
        #expect(outcome.error?.reason == .bodyTooLarge)
        #expect(outcome.error?.suggestedStatus == 413)
    }

    @Test func chunkLineLimit() {
        var limits = HTTP1Limits()
        limits.maxChunkLineBytes = 64
        let outcome = parse(
            [bytes("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;" + String(repeating: "e", count: 100))],
            role: .requests, limits: limits)
        #expect(outcome.error?.reason == .chunkLineTooLong)
    }
}

@Suite("HTTP1Parser token rules")
struct HTTP1TokenTests {
    @Test func everyTokenCharacterIsAcceptedInNamesAndMethods() {
        let token = "!#$%&'*+-.^_`|~09AZaz"
        let outcome = parse([bytes("\(token) / HTTP/1.1\r\nHost: x\r\n\(token): v\r\n\r\n")], role: .requests)
        #expect(outcome.error == nil)
        #expect(
            outcome.events.first
                == .requestHead(HTTPRequestHead(method: token, target: "/", headers: [("Host", "x"), (token, "v")])))
    }

    @Test("separators are not token characters", arguments: Array("\"(),/;<=>?@[\\]{}\u{7F}\u{01}"))
    func separatorInMethodIsRejected(separator: Character) {
        let outcome = parse([bytes("GE\(separator)T / HTTP/1.1\r\nHost: x\r\n\r\n")], role: .requests)
        #expect(outcome.error?.reason == .invalidMethod)
    }
}
