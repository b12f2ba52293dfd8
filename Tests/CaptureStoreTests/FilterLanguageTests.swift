import ATSPolicy
import Foundation
import GRDB
import ProxyTrace
import Testing
import TestSupport

@testable import CaptureStore

private func parse(_ text: String) throws -> CaptureCondition? {
    try CaptureFilter(parsing: text).condition
}

private func syntaxError(_ text: String) -> FilterSyntaxError? {
    do {
        _ = try CaptureFilter(parsing: text)
        return nil
    } catch {
        return error
    }
}

@Suite("Filter language")
struct FilterLanguageTests {
    @Test("Terms: host, status forms, verdict words, method, text, code, run, problems")
    func terms() throws {
        #expect(try parse("host:API.Example.com") == .host("api.example.com"))
        #expect(try parse("host:*.example.com") == .host(".example.com"))
        #expect(try parse("status:404") == .status(404...404))
        #expect(try parse("status:4xx") == .status(400...499))
        #expect(try parse("status:500-503") == .status(500...503))
        #expect(try parse("status:none") == .noStatus)
        #expect(try parse("verdict:ok") == .outcome(.allowed))
        #expect(try parse("verdict:blocked") == .outcome(.blocked))
        #expect(try parse("verdict:n/a") == .outcome(.notEvaluated))
        #expect(try parse("method:post") == .method("POST"))
        #expect(try parse("text:login") == .text("login"))
        #expect(try parse("text:\"two words (x)\"") == .text("two words (x)"))
        #expect(try parse("code:-1200") == .code(-1200))
        #expect(try parse("run:2") == .run(2))
        #expect(try parse("problems") == .problems)
        #expect(try parse("Host:a.test") == .host("a.test"), "keys are case-insensitive")
    }

    @Test("Juxtaposition is AND, or binds looser, not and - negate, parentheses group")
    func combinations() throws {
        #expect(try parse("host:a.test status:4xx") == .all([.host("a.test"), .status(400...499)]))
        #expect(try parse("host:a.test and method:GET") == .all([.host("a.test"), .method("GET")]))
        #expect(try parse("-host:a.test") == .not(.host("a.test")))
        #expect(try parse("not verdict:ok") == .not(.outcome(.allowed)))
        #expect(try parse("--host:a.test") == .not(.not(.host("a.test"))))
        #expect(
            try parse("host:a.test status:5xx or verdict:blocked")
                == .any([.all([.host("a.test"), .status(500...599)]), .outcome(.blocked)]))
        #expect(try parse("verdict:blocked | verdict:failed") == .any([.outcome(.blocked), .outcome(.failed)]))
        #expect(
            try parse("host:a.test (status:5xx or -verdict:ok)")
                == .all([.host("a.test"), .any([.status(500...599), .not(.outcome(.allowed))])]))
        #expect(try parse("not (method:GET or method:HEAD)") == .not(.any([.method("GET"), .method("HEAD")])))
        #expect(try parse("text:\"or\"") == .text("or"), "a quoted word is a value, never a keyword")
    }

    @Test("Errors say where (column) and what was expected")
    func errors() throws {
        let cases: [(String, Int, String)] = [
            ("", 1, "an empty filter"),
            ("hots:a.test", 1, "unknown key \"hots\"; expected one of host, status, verdict, method, text, code, run"),
            ("host:a.test status:abc", 20, "\"abc\" is not a status; expected 404, a class such as 4xx"),
            ("verdict:maybe", 9, "\"maybe\" is not a verdict; expected ok, blocked, violation, failed or n/a"),
            ("host:", 6, "expected a value after host:"),
            ("login", 1, "\"login\" is not a condition; expected KEY:VALUE"),
            ("status:4xx method", 12, "expected a value: method:VALUE"),
            ("(host:a.test", 13, "expected ) to close the ( at column 1"),
            ("host:a.test)", 12, "a ) with no ( before it"),
            ("host:a.test or", 15, "expected a condition before the end"),
            ("or host:a.test", 1, "expected a condition before \"or\""),
            ("not", 4, "expected a condition after \"not\""),
            ("- host:a.test", 1, "expected a condition right after \"-\""),
            ("text:\"open", 6, "a quote with no closing quote"),
            ("code:x", 6, "\"x\" is not an error code"),
            ("run:0", 5, "\"0\" is not a run number"),
            ("status:99", 8, "\"99\" is not a status"),
        ]
        for (text, column, message) in cases {
            let error = try #require(syntaxError(text), "\(text) should not parse")
            #expect(error.column == column, "\(text): \(error.message)")
            #expect(error.message.hasPrefix(message), "\(text): \(error.message)")
        }
        let shown = try #require(syntaxError("host:a.test status:abc")).description
        #expect(shown == """
            filter, column 20: "abc" is not a status; expected 404, a class such as 4xx, a range such as 400-499, or none
              host:a.test status:abc
                                 ^
            """)
    }

    @Test("Nesting is bounded: a deep expression is an error, not a crash")
    func depth() {
        let deep = String(repeating: "(", count: 10_000) + "problems" + String(repeating: ")", count: 10_000)
        #expect(syntaxError(deep)?.message.hasPrefix("nested more than") == true)
        let negations = String(repeating: "not ", count: 10_000) + "problems"
        #expect(syntaxError(negations)?.message.hasPrefix("nested more than") == true)
    }

    @Test(
        "The deepest filter of each shape the parser accepts runs in SQLite, whose parser overflows past about 30 levels",
        arguments: [
            // and/or alternating inside parentheses: the SQL nests once per level.
            { (n: Int) in String(repeating: "host:.a.test (verdict:blocked or (", count: n) + "-verdict:failed" + String(repeating: "))", count: n) },
            // Negations in a row (the fuzzer's find: 45 of them overflowed before they were folded).
            { (n: Int) in String(repeating: "not ", count: n) + "verdict:blocked" },
            { (n: Int) in String(repeating: "-", count: n) + "status:5xx" },
            // Negations around alternations: pushed down to the terms.
            { (n: Int) in String(repeating: "not (host:.a.test or not (verdict:failed ", count: n) + "-status:4xx" + String(repeating: "))", count: n) },
        ] as [@Sendable (Int) -> String])
    func deepestRuns(shape: @Sendable (Int) -> String) throws {
        let reader = try CaptureReader(path: Self.capturePath())
        var deepest: (expression: String, filter: CaptureFilter)?
        var reachedBound = false
        for n in 1...200 {
            let expression = shape(n)
            do {
                deepest = (expression, try CaptureFilter(parsing: expression))
            } catch {
                // Past the bound: the parser must say so, not refuse the expression for another reason.
                #expect(error.message.hasPrefix("nested more than"), "\(expression): \(error)")
                reachedBound = true
                break
            }
        }
        #expect(reachedBound, "no depth up to 200 was refused")
        let (expression, filter) = try #require(deepest)
        #expect(throws: Never.self, "\(expression)") { _ = try reader.count(matching: filter) }
        #expect(throws: Never.self, "\(expression)") { _ = try reader.summaries(matching: filter, limit: 5) }
    }

    @Test("The longest filters the parser accepts run in SQLite, which refuses expressions deeper than 1,000")
    func longestRuns() throws {
        let reader = try CaptureReader(path: Self.capturePath())
        let terms = 256
        for expression in [
            String(repeating: "-host:.a.test ", count: terms),
            String(repeating: "problems or ", count: terms - 1) + "problems",
            "(" + String(repeating: "status:5xx ", count: terms / 2) + ") or not (" + String(repeating: "-text:x ", count: terms / 2) + ")",
        ] {
            let filter = try CaptureFilter(parsing: expression)
            #expect(throws: Never.self, "\(expression.prefix(40))") { _ = try reader.count(matching: filter) }
            #expect(throws: Never.self, "\(expression.prefix(40))") { _ = try reader.summaries(matching: filter, limit: 5) }
        }
        #expect(syntaxError(String(repeating: "problems ", count: terms + 1))?.message == "more than 256 conditions in one filter")
    }

    /// A capture with one exchange, for filters that only need to run.
    static func capturePath() throws -> String {
        let path = try TestScratch.folder("filter").appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(
            path: path, run: CaptureRunInfo(started: 1, atsproxyVersion: "t", bodyLimit: 0, settings: [:]))
        var e = ExchangeSummary(
            method: "GET", url: "https://a.test/", status: nil, httpVersion: "HTTP/1.1", outcome: .blocked, errors: [],
            requestBytes: 0, responseBytes: 0, durationMilliseconds: 1)
        e.detail = ExchangeDetail(timings: ExchangeTimings(started: 1, ended: 2))
        try writer.write([.exchange(e)])
        try writer.close(ended: 3)
        return path
    }

    @Test("Parsed filters select the right exchanges from a capture, negations included where a column is NULL")
    func evaluation() throws {
        let dir = try TestScratch.folder("filter")
        let path = dir.appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(
            path: path, run: CaptureRunInfo(started: 1, atsproxyVersion: "t", bodyLimit: 0, settings: [:]))
        func exchange(
            _ method: String, _ url: String, _ status: Int?, _ outcome: ExchangeSummary.ATSOutcome,
            errors: [ExchangeError] = [], interruption: String? = nil
        ) -> CaptureItem {
            var e = ExchangeSummary(
                method: method, url: url, status: status, httpVersion: "HTTP/1.1", outcome: outcome, errors: errors,
                requestBytes: 0, responseBytes: 0, durationMilliseconds: 1, interruption: interruption)
            e.detail = ExchangeDetail(timings: ExchangeTimings(started: 1, ended: 2))
            return .exchange(e)
        }
        let tls = ExchangeError(urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836))
        try writer.write([
            exchange("GET", "https://api.example.com/login", 200, .allowed),  // 1
            exchange("POST", "https://api.example.com/login", 401, .allowed),  // 2
            exchange("CONNECT", "https://old.example.com", nil, .blocked, errors: [tls]),  // 3
            exchange("GET", "http://plain.test/", 200, .violation, errors: [ExchangeError(urlError: URLErrorCode(-1022))]),  // 4
            exchange("GET", "https://cdn.example.com/a.js", 200, .allowed, interruption: "stream reset"),  // 5
            exchange("CONNECT", "https://pinned.test", nil, .notEvaluated),  // 6
        ])
        try writer.close(ended: 3)
        let reader = try CaptureReader(path: path)
        func ids(_ expression: String) throws -> [Int64] {
            try reader.exchanges(matching: CaptureFilter(parsing: expression)).map(\.id).sorted()
        }
        #expect(try ids("host:api.example.com") == [1, 2])
        #expect(try ids("host:.example.com -host:cdn.example.com") == [1, 2, 3])
        #expect(try ids("problems") == [2, 3, 4, 5])
        #expect(try ids("not problems") == [1, 6])
        #expect(try ids("-status:2xx") == [2, 3, 6], "no status is not 2xx")
        #expect(try ids("status:none") == [3, 6])
        #expect(try ids("code:-9836") == [3])
        #expect(try ids("code:-1022 or code:-1200") == [3, 4])
        #expect(try ids("method:POST text:login") == [2])
        #expect(try ids("verdict:blocked or (host:plain.test verdict:violation)") == [3, 4])
        #expect(try ids("verdict:n/a") == [6])
        #expect(try reader.count(matching: CaptureFilter(parsing: "-verdict:ok")) == 3)
        #expect(try ids("host:api.example.com run:1") == [1, 2])
        // Negations of combinations, pushed down to the terms (De Morgan) before SQL: NULL statuses included.
        #expect(try ids("not (status:2xx verdict:ok)") == [2, 3, 4, 6])
        #expect(try ids("not (status:4xx or problems)") == [1, 6])
        #expect(try ids("not (not status:2xx or -verdict:ok)") == [1, 5])
        #expect(try ids("not not not (status:none or method:POST)") == [1, 4, 5])

        // A host term ANDed with others stays a condition of its own, so the listing reads the host's index.
        var sql = CaptureFilter.SQL()
        try CaptureFilter(parsing: "host:api.example.com -verdict:ok text:login").compile(into: &sql)
        #expect(sql.conditions.first == "e.host = ?")
        let db = try DatabaseQueue(path: path, configuration: { var c = Configuration(); c.readonly = true; return c }())
        let plan = try db.read { db in
            try Row.fetchAll(
                db, sql: "EXPLAIN QUERY PLAN SELECT e.id FROM exchanges e WHERE " + sql.conditions.joined(separator: " AND ")
                    + " ORDER BY e.id DESC LIMIT 50", arguments: sql.arguments)
        }
        #expect(plan.contains { ($0["detail"] as String).contains("exchanges_by_host") }, "\(plan)")
    }
}
