import Foundation
import GRDB
import HTTP1Core
import ProxyTrace
import Testing
import TestSupport

@testable import CaptureStore

/// The rules that acted on an exchange (issue 33) in a capture: written, read back by every reader path, and absent
/// (not an error) in a capture made before the column existed.
@Suite("Capture store: applied rules")
struct CaptureRulesTests {
    static let run = CaptureRunInfo(
        started: 1_700_000_000, atsproxyVersion: "test", bodyLimit: 1024, settings: ["ats": "enforce"])

    static let applied = [
        AppliedRule(id: "login", action: "map-local", point: "request-head", note: "served mocks/login.json"),
        AppliedRule(id: "--modify-headers #1", action: "modify-headers", point: "response-head"),
    ]

    /// A mocked exchange, answered by the proxy from a file, when `ruled`; a plain one otherwise.
    static func exchange(_ i: Int, ruled: Bool) -> ExchangeSummary {
        var e = ExchangeSummary(
            method: "GET", url: "https://api.test/v1/\(i)", status: 200, httpVersion: "HTTP/1.1", outcome: .allowed,
            errors: [], requestBytes: 0, responseBytes: 2, durationMilliseconds: 1)
        e.connection = ConnectionRecord(connectionID: UInt64(i))
        e.action = .relayed
        e.detail = ExchangeDetail(
            request: HTTPRequestHead(method: "GET", target: "/v1/\(i)", headers: [("Host", "api.test")]),
            clientResponse: HTTPResponseHead(status: 200, headers: [("Content-Type", "application/json")]),
            timings: ExchangeTimings(started: 1_700_000_000 + Double(i), ended: 1_700_000_000.5 + Double(i)))
        if ruled { e.rules = applied }
        return e
    }

    @Test("An exchange's rules come back from the full read, the list's summaries and a listing; none stay none")
    func roundTrip() throws {
        let path = try TestScratch.folder("capture-rules").appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: Self.run)
        try writer.write([.exchange(Self.exchange(1, ruled: true)), .exchange(Self.exchange(2, ruled: false))])
        try writer.close(ended: 1_700_000_010)

        let reader = try CaptureReader(path: path)
        #expect(reader.schemaSteps == [
            CaptureSchema.Step.tables, CaptureSchema.Step.appliedRules, CaptureSchema.Step.replayOf,
        ])
        #expect(try reader.exchange(id: 1)?.record.rules == Self.applied)
        #expect(try reader.exchange(id: 2)?.record.rules == [])
        #expect(try reader.summaries().map(\.record.rules) == [[], Self.applied])
        #expect(try reader.exchanges(after: nil).map(\.record.rules) == [Self.applied, []])
        // Stored as JSON text in a column of its own, NULL when no rule acted.
        let db = try DatabaseQueue(path: path, configuration: { var c = Configuration(); c.readonly = true; return c }())
        try db.read { db in
            let stored = try String?.fetchAll(db, sql: "SELECT rules FROM exchanges ORDER BY id")
            #expect(stored.count == 2)
            #expect(stored[0]?.contains("\"id\":\"login\"") == true)
            #expect(stored[1] == nil)
        }
    }

    @Test("A capture made before the rules column reads as one no rule touched; a run appending to it adds the column")
    func captureWithoutTheColumn() throws {
        let path = try TestScratch.folder("capture-rules-v1").appendingPathComponent("old.atscap").path
        // A file of the first release: step 1 only, the same tables and rows.
        var v1 = DatabaseMigrator()
        v1.registerMigration(CaptureSchema.Step.tables) { db in
            try db.execute(sql: "PRAGMA application_id = \(CaptureSchema.applicationID)")
            try db.execute(sql: CaptureSchema.tables)
        }
        let queue = try DatabaseQueue(path: path)
        try v1.migrate(queue)
        try queue.write { db in
            try db.execute(sql: """
                INSERT INTO runs (id, started, atsproxy_version, body_limit, settings) VALUES (1, 1, 'old', 0, '[]');
                INSERT INTO exchanges (run_id, started, ended, method, url, host, http_version, outcome, errors,
                    request_bytes, response_bytes, duration_ms)
                VALUES (1, 1, 2, 'GET', 'https://old.test/', 'old.test', 'HTTP/1.1', 'allowed', '', 0, 0, 1);
                """)
        }
        try queue.close()
        let columns = try Self.columns(path)
        #expect(!columns.contains("rules"), "the file stands for one made before the column")

        let reader = try CaptureReader(path: path)
        #expect(reader.schemaSteps == [CaptureSchema.Step.tables])
        #expect(try reader.exchange(id: 1)?.record.rules == [])
        #expect(try reader.summaries().map(\.record.url) == ["https://old.test/"])
        #expect(try reader.summaries().first?.record.rules == [])
        try reader.close()
        #expect(try Self.columns(path) == columns, "reading changes nothing")

        // A run appending to it: the step is applied, old rows stay as they were, new ones keep their rules.
        let writer = try CaptureWriter.open(path: path, run: Self.run)
        try writer.write([.exchange(Self.exchange(3, ruled: true))])
        try writer.close(ended: 5)
        #expect(try Self.columns(path) == columns + ["rules", "replay_of"])
        let after = try CaptureReader(path: path)
        #expect(try after.exchanges(after: nil).map(\.record.rules) == [[], Self.applied])
    }

    static func columns(_ path: String) throws -> [String] {
        let db = try DatabaseQueue(path: path, configuration: { var c = Configuration(); c.readonly = true; return c }())
        defer { try? db.close() }
        return try db.read { db in
            try Row.fetchAll(db, sql: "PRAGMA table_info(exchanges)").map { $0["name"] as String }
        }
    }
}
