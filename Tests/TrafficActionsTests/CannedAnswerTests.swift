import Foundation
import HTTP1Core
import TestSupport
import Testing

@testable import TrafficActions

/// Answers: a mocked endpoint or a simulated failure, framed right.
@Suite struct CannedAnswerTests {
    let files = POSIXFileReader()

    @Test func aTextAnswerHasItsStatusHeadersAndLength() throws {
        let answer = try CannedAnswer(status: 503, headers: [("Retry-After", "30")], body: .text("down for é"))
        let response = answer.response(method: "GET", files: files)
        #expect(response.head.status == 503)
        #expect(response.head.reason == "Service Unavailable")
        #expect(response.head.headers[first: "Retry-After"] == "30")
        #expect(response.head.headers[first: "Content-Type"] == "text/plain; charset=utf-8")
        #expect(response.head.headers[first: "Content-Length"] == "11")
        #expect(response.body == Array("down for é".utf8))
    }

    @Test func aFileAnswerIsReadWhenTheRequestComesAndTypedByItsExtension() throws {
        let folder = try TestScratch.folder("answer")
        let file = folder.appendingPathComponent("mock.json")
        try Data("[1]".utf8).write(to: file)
        let answer = try CannedAnswer(status: 200, body: .file(file.path))
        #expect(answer.response(method: "GET", files: files).body == Array("[1]".utf8))
        try Data("[1,2]".utf8).write(to: file)
        let response = answer.response(method: "POST", files: files)
        #expect(response.body == Array("[1,2]".utf8))
        #expect(response.head.headers[first: "Content-Type"] == "application/json")
        #expect(response.head.headers[first: "Content-Length"] == "5")
        let missing = try CannedAnswer(status: 200, body: .file(folder.appendingPathComponent("no").path))
        #expect(missing.response(method: "GET", files: files).head.status == 500)
        #expect(missing.response(method: "GET", files: files).notices.map(\.kind) == [.missingFile])
        #expect(answer.response(method: "GET", files: files, limit: 2).notices.map(\.kind) == [.tooLarge])
    }

    @Test func headAnd204GetNoBody() throws {
        let answer = try CannedAnswer(status: 200, body: .text("hello"))
        let head = answer.response(method: "HEAD", files: files)
        #expect(head.body.isEmpty && head.head.headers[first: "Content-Length"] == "5")
        let empty = try CannedAnswer(status: 204, body: .text("ignored")).response(method: "GET", files: files)
        #expect(empty.body.isEmpty && !empty.head.headers.contains(name: "Content-Length"))
    }

    @Test func aBadStatusOrAFramingHeaderIsRefusedWhenTheRuleLoads() {
        #expect(throws: RuleActionError.self) { try CannedAnswer(status: 101) }
        #expect(throws: RuleActionError.self) { try CannedAnswer(status: 600) }
        #expect(throws: RuleActionError.self) { try CannedAnswer(status: 200, headers: [("Content-Length", "3")]) }
    }
}
