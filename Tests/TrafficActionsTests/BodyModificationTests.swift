import Foundation
import HTTP1Core
import Inflate
import TestSupport
import Testing

@testable import TrafficActions

/// Modify body: the regex runs on the decoded text, the body stays well framed, and anything it cannot rewrite
/// safely is left alone with a notice.
@Suite struct BodyModificationTests {
    func rule(_ pattern: String, _ replacement: String) throws -> BodyModification {
        try BodyModification(pattern: pattern, replacement: replacement)
    }

    func response(_ headers: [(String, String)]) -> HTTPResponseHead {
        HTTPResponseHead(status: 200, headers: HTTPHeaders(headers))
    }

    /// Python's gzip or zlib module on `data`: an encoder and decoder independent of ours.
    func python(_ code: String, _ data: [UInt8]) throws -> [UInt8] {
        let result = try runCommand(
            try TestPython.path(),
            ["-c", "import sys, gzip, zlib; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(\(code))"],
            input: Data(data))
        #expect(result.status == 0, "\(result.stderrText)")
        return Array(result.stdout)
    }

    @Test func aTextBodyIsRewrittenAndContentLengthFollows() throws {
        let head = response([("Content-Type", "application/json"), ("Content-Length", "29"), ("X-A", "1")])
        let body = Array("{\"premium\": false, \"n\": 1}   ".utf8)
        let change = BodyModification.apply([try rule("\"premium\": false", "\"premium\": true")], to: head, body: body)
        #expect(String(decoding: change.body, as: UTF8.self) == "{\"premium\": true, \"n\": 1}   ")
        #expect(change.changed.headers.fields.map(\.name) == ["Content-Type", "Content-Length", "X-A"])
        #expect(change.changed.headers[first: "Content-Length"] == "28")
        #expect(change.original.headers[first: "Content-Length"] == "29")
        #expect(change.replacements == 1 && change.notices.isEmpty)
    }

    @Test func groupsAndEscapesInTheReplacementUsePythonSyntax() throws {
        let head = response([("Content-Type", "text/plain")])
        let body = Array("id=12 id=345".utf8)
        let change = BodyModification.apply(
            [try rule("id=(?<n>\\d+)", "[\\1|\\g<1>|\\g<n>|\\\\|\\t]")], to: head, body: body)
        #expect(String(decoding: change.body, as: UTF8.self) == "[12|12|12|\\|\t] [345|345|345|\\|\t]")
        #expect(change.replacements == 2)
    }

    @Test func severalRulesApplyInOrder() throws {
        let change = BodyModification.apply(
            [try rule("a", "b"), try rule("b", "c")], to: response([("Content-Type", "text/html")]),
            body: Array("ab".utf8))
        #expect(change.body == Array("cc".utf8) && change.replacements == 3)
    }

    @Test func noMatchLeavesTheBodyAndHeadAsTheyWere() throws {
        let head = response([("Content-Type", "text/plain"), ("Content-Length", "3")])
        let change = BodyModification.apply([try rule("zzz", "y")], to: head, body: Array("abc".utf8))
        #expect(change.body == Array("abc".utf8) && change.changed == head && change.replacements == 0)
    }

    @Test func aRequestBodyIsRewrittenToo() throws {
        let head = HTTPRequestHead(
            method: "POST", target: "/login",
            headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Content-Length", "9")])
        let change = BodyModification.apply([try rule("user=\\w+", "user=qa")], to: head, body: Array("user=anne".utf8))
        #expect(change.body == Array("user=qa".utf8))
        #expect(change.changed.headers[first: "Content-Length"] == "7")
    }

    @Test func aGzipBodyIsDecodedRewrittenAndReEncodedForAnIndependentDecoder() throws {
        let original = Array(String(repeating: "{\"flag\": \"off\"}\n", count: 200).utf8)
        let gzipped = try python("gzip.compress(d, mtime=0)", original)
        let head = response([
            ("Content-Type", "application/json; charset=utf-8"), ("Content-Encoding", "gzip"),
            ("Content-Length", String(gzipped.count)),
        ])
        let change = BodyModification.apply([try rule("off", "on")], to: head, body: gzipped)
        #expect(change.replacements == 200)
        #expect(change.body.starts(with: [0x1f, 0x8b]))
        #expect(change.changed.headers[first: "Content-Encoding"] == "gzip")
        #expect(change.changed.headers[first: "Content-Length"] == String(change.body.count))
        let decoded = try python("gzip.decompress(d)", change.body)
        #expect(decoded == Array(String(repeating: "{\"flag\": \"on\"}\n", count: 200).utf8))
    }

    @Test func aDeflateBodyRoundTripsInItsFormatZlibOrRaw() throws {
        let original = Array("<p>old</p>".utf8)
        let zlibbed = try python("zlib.compress(d)", original)
        let head = response([("Content-Type", "text/html"), ("Content-Encoding", "deflate")])
        let change = BodyModification.apply([try rule("old", "new")], to: head, body: zlibbed)
        #expect(try python("zlib.decompress(d)", change.body) == Array("<p>new</p>".utf8))
        // Raw deflate, as some servers send for `deflate`: re-encoded raw.
        let raw = try python("(lambda c: c.compress(d) + c.flush())(zlib.compressobj(6, zlib.DEFLATED, -15))", original)
        let rawChange = BodyModification.apply([try rule("old", "new")], to: head, body: raw)
        #expect(try python("zlib.decompress(d, -15)", rawChange.body) == Array("<p>new</p>".utf8))
    }

    @Test func brotliZstdAndStackedCodingsAreLeftAloneWithANotice() throws {
        for coding in ["br", "zstd", "gzip, gzip", "compress"] {
            let head = response([("Content-Type", "text/plain"), ("Content-Encoding", coding)])
            let change = BodyModification.apply([try rule("a", "b")], to: head, body: Array("aaa".utf8))
            #expect(change.body == Array("aaa".utf8), "\(coding)")
            #expect(change.notices.map(\.kind) == [.unsupportedEncoding], "\(coding)")
        }
    }

    @Test func aCorruptGzipBodyIsLeftAloneWithANotice() throws {
        let head = response([("Content-Type", "text/plain"), ("Content-Encoding", "gzip")])
        let change = BodyModification.apply([try rule("a", "b")], to: head, body: [0x1f, 0x8b, 0x08, 0x00, 0x01])
        #expect(change.body == [0x1f, 0x8b, 0x08, 0x00, 0x01])
        #expect(change.notices.map(\.kind) == [.undecodable])
    }

    @Test func nonTextTypesAndUnknownCharsetsAreLeftAloneWithANotice() throws {
        let cases: [[(String, String)]] = [
            [("Content-Type", "image/png")], [("Content-Type", "application/octet-stream")],
            [("Content-Type", "text/plain; charset=shift_jis")], [("Content-Type", "application/x-protobuf")],
        ]
        for headers in cases {
            let change = BodyModification.apply([try rule("a", "b")], to: response(headers), body: Array("aaa".utf8))
            #expect(change.body == Array("aaa".utf8), "\(headers)")
            #expect(change.notices.map(\.kind) == [.notText], "\(headers)")
        }
        // Invalid UTF-8 under a UTF-8 type.
        let bad = BodyModification.apply(
            [try rule("a", "b")], to: response([("Content-Type", "text/plain")]), body: [0x61, 0xff])
        #expect(bad.body == [0x61, 0xff] && bad.notices.map(\.kind) == [.notText])
    }

    @Test func withoutAContentTypeAUTF8BodyCountsAsText() throws {
        let change = BodyModification.apply([try rule("a", "b")], to: response([]), body: Array("aaa".utf8))
        #expect(change.body == Array("bbb".utf8))
        let binary = BodyModification.apply([try rule("a", "b")], to: response([]), body: [0x61, 0xc3])
        #expect(binary.notices.map(\.kind) == [.notText])
    }

    @Test func aLatin1BodyIsRewrittenInLatin1() throws {
        let head = response([("Content-Type", "text/plain; charset=\"ISO-8859-1\""), ("Content-Length", "5")])
        let change = BodyModification.apply(
            [try rule("caf.", "Café!")], to: head, body: [0x63, 0x61, 0x66, 0xE9, 0x21])
        #expect(change.body == [0x43, 0x61, 0x66, 0xE9, 0x21, 0x21])
        #expect(change.changed.headers[first: "Content-Length"] == "6")
        let unencodable = BodyModification.apply([try rule("caf", "€")], to: head, body: [0x63, 0x61, 0x66])
        #expect(unencodable.body == [0x63, 0x61, 0x66] && unencodable.notices.map(\.kind) == [.notText])
    }

    @Test func aBodyOverTheLimitEncodedOrDecodedIsLeftAloneWithANotice() throws {
        let head = response([("Content-Type", "text/plain")])
        let big = BodyModification.apply([try rule("a", "b")], to: head, body: Array("aaaaa".utf8), limit: 4)
        #expect(big.body == Array("aaaaa".utf8) && big.notices.map(\.kind) == [.tooLarge])
        let bomb = try python("gzip.compress(b'a' * 100000, mtime=0)", [])
        let gzipHead = response([("Content-Type", "text/plain"), ("Content-Encoding", "gzip")])
        let inflated = BodyModification.apply([try rule("a", "b")], to: gzipHead, body: bomb, limit: 1000)
        #expect(inflated.body == bomb && inflated.notices.map(\.kind) == [.tooLarge])
    }

    @Test func aChunkedBodyKeepsItsFramingWithoutContentLength() throws {
        let head = response([("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")])
        let change = BodyModification.apply([try rule("a", "bb")], to: head, body: Array("a".utf8))
        #expect(change.body == Array("bb".utf8))
        #expect(change.changed.headers == head.headers)
    }

    @Test func anInvalidRegexIsRefusedWhenTheRuleLoads() {
        #expect(throws: RuleActionError.self) { try BodyModification(pattern: "(", replacement: "") }
        #expect(throws: RuleActionError.self) { try BodyModification(pattern: "", replacement: "x") }
    }
}
