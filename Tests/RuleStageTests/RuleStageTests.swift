import Foundation
import HTTP1Core
import ProxyTrace
import RuleStage
import Testing
import TrafficRules

private func book(_ options: [(String, String)], directory: String = "/") throws -> RuleBook {
    let loaded = try RuleSet.parse(options: options.map { (option: $0.0, value: $0.1) })
        .flatMap { RuleLoader.load($0, relativeTo: directory) }.get()
    return RuleBook(optionRules: loaded)
}

private func get(_ target: String, _ headers: [(String, String)] = []) -> HTTPRequestHead {
    HTTPRequestHead(method: "GET", target: target, version: .http1_1, headers: HTTPHeaders([("Host", "api.test")] + headers))
}

@Suite("The rules stage: which rules act at each point, and what they decide")
struct RuleStageTests {
    @Test("No rule for a point answers nil there: a request no rule touches costs nothing more")
    func nothingToDo() throws {
        let rules = try book([("--fault", "legacy.test=tls1.0")]).snapshot()
        #expect(rules.atRequestHead(get("/"), url: "https://api.test/", host: "api.test", port: 443) == nil)
        #expect(rules.atConnection(host: "api.test", port: 443) == nil)
        #expect(rules.atConnection(host: "legacy.test", port: 443)?.fault == .tls10)
    }

    @Test("A filter decides: method and host keys at the request head")
    func filters() throws {
        let rules = try book([("--answer", "|host:api.test method:POST|201|created")]).snapshot()
        #expect(rules.atRequestHead(get("/"), url: "https://api.test/", host: "api.test", port: 443) == nil)
        var post = get("/")
        post.method = "POST"
        let ruling = try #require(rules.atRequestHead(post, url: "https://api.test/", host: "api.test", port: 443))
        #expect(ruling.answer?.head.status == 201)
        #expect(ruling.answer?.body == Array("created".utf8))
        #expect(ruling.applied == [AppliedRule(id: "--answer #1", action: "answer", point: "request-head", note: "answered 201")])
    }

    @Test("Header rules apply together before an answering rule, and the response's wait for the response head")
    func headerRules() throws {
        let rules = try book([
            ("--modify-headers", "|Accept|application/json"), ("--modify-headers", "/status:5xx/Retry-After/30"),
        ]).snapshot()
        let ruling = try #require(
            rules.atRequestHead(get("/", [("Accept", "*/*")]), url: "https://api.test/", host: "api.test", port: 443))
        #expect(ruling.head.headers.values(for: "Accept") == ["application/json"])
        #expect(ruling.applied.map(\.id) == ["--modify-headers #1"])
        let response = try #require(ruling.response)
        let ok = try #require(response.atResponseHead(HTTPResponseHead(status: 200, reason: "OK")))
        #expect(ok.head.headers.values(for: "Retry-After").isEmpty)
        #expect(ok.head.headers.values(for: "Accept") == ["application/json"], "a rule without a filter: both heads")
        let failed = try #require(response.atResponseHead(HTTPResponseHead(status: 503, reason: "Unavailable")))
        #expect(failed.head.headers.values(for: "Retry-After") == ["30"])
        #expect(failed.applied.map(\.id) == ["--modify-headers #1", "--modify-headers #2"])
    }

    @Test("Response rules the request already rules out (another host) are not carried: the response pays nothing")
    func responseRulesRuledOut() throws {
        let rules = try book([
            ("--modify-headers", "|host:other.test status:5xx|Retry-After|30"), ("--modify-body", "|host:other.test|a|b"),
            ("--modify-headers", "|status:5xx|X-Failed|1"),
        ]).snapshot()
        let ruling = try #require(rules.atRequestHead(get("/"), url: "https://api.test/", host: "api.test", port: 443))
        let response = try #require(ruling.response, "the third rule may still hold")
        #expect(!response.mayEditBody, "the body rule is for another host")
        let failed = try #require(response.atResponseHead(HTTPResponseHead(status: 503, reason: "Unavailable")))
        #expect(failed.applied.map(\.id) == ["--modify-headers #2"])
        let onlyOthers = try book([("--modify-headers", "|host:other.test status:5xx|Retry-After|30")]).snapshot()
        #expect(onlyOthers.atRequestHead(get("/"), url: "https://api.test/", host: "api.test", port: 443) == nil)
    }

    @Test("A switched-off rule stops acting, and the book's generation moves so sessions look again")
    func switching() throws {
        let rules = try book([("--block-list", "ads.test")])
        let before = rules.generation
        #expect(rules.snapshot().atConnection(host: "ads.test", port: 443)?.block == .reset)
        #expect(rules.setEnabled("--block-list #1", false))
        #expect(rules.generation != before)
        #expect(rules.snapshot().atConnection(host: "ads.test", port: 443) == nil)
        #expect(!rules.setEnabled("no-such-rule", false))
        #expect(rules.listing().map(\.enabled) == [false])
    }

    @Test("A rule whose action cannot load is refused with its source, and nothing loads")
    func badAction() throws {
        let set = try RuleSet.parse(options: [
            (option: "--throttle", value: "5G"), (option: "--modify-headers", value: "/X-A/1"),
        ]).get()
        let result = RuleLoader.load(set, relativeTo: "/")
        guard case .failure(let error) = result else {
            Issue.record("a 5G throttle loaded")
            return
        }
        #expect(error.errors.map(\.source.description) == ["--throttle #1"])
        #expect(error.description.contains("5G"))
    }

    @Test("@FILE values are read when the rules load, relative to the rules file's folder")
    func fileValues() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rulestage-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data("Bearer test-token\n".utf8).write(to: URL(fileURLWithPath: directory + "/token.txt"))
        let rules = try book([("--modify-headers", "/Authorization/@token.txt")], directory: directory).snapshot()
        let ruling = try #require(rules.atRequestHead(get("/"), url: "https://api.test/", host: "api.test", port: 443))
        #expect(ruling.head.headers.values(for: "Authorization") == ["Bearer test-token"])
        let missing = RuleLoader.load(
            try RuleSet.parse(options: [(option: "--modify-headers", value: "/A/@nope.txt")]).get(), relativeTo: directory)
        guard case .failure = missing else {
            Issue.record("a missing @FILE loaded")
            return
        }
    }
}
