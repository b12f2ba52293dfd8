import Foundation
import GRDB
import HTTP1Core
import ProxyTrace
import Testing
import TestSupport

@testable import CaptureStore

/// A replay's link to the exchange it resends (issue 34) in a capture: written, read back by every reader path,
/// found by `replay(of:after:)`, and absent (not an error) in a capture made before the column existed.
@Suite("Capture store: replays")
struct CaptureReplayTests {
    static func exchange(_ i: Int, replayOf: Int64?) -> ExchangeSummary {
        var e = CaptureRulesTests.exchange(i, ruled: false)
        e.replayOf = replayOf
        return e
    }

    @Test("A replay names its original in the full read, the list's summaries and a listing; the app's rows name none")
    func roundTrip() throws {
        let path = try TestScratch.folder("capture-replay").appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: CaptureRulesTests.run)
        try writer.write([
            .exchange(Self.exchange(1, replayOf: nil)), .exchange(Self.exchange(2, replayOf: 1)),
            .exchange(Self.exchange(3, replayOf: 1)),
        ])
        try writer.close(ended: 1_700_000_010)

        let reader = try CaptureReader(path: path)
        #expect(reader.schemaSteps.last == CaptureSchema.Step.replayOf)
        #expect(try reader.exchange(id: 1)?.record.replayOf == nil)
        #expect(try reader.exchange(id: 2)?.record.replayOf == 1)
        #expect(try reader.summaries().map(\.record.replayOf) == [1, 1, nil])
        #expect(try reader.exchanges(after: nil).map(\.record.replayOf) == [nil, 1, 1])
        // The row a replay made: the first after the id seen before sending.
        #expect(try reader.replay(of: 1, after: 0) == 2)
        #expect(try reader.replay(of: 1, after: 2) == 3)
        #expect(try reader.replay(of: 1, after: 3) == nil)
        #expect(try reader.replay(of: 2, after: 0) == nil)
        #expect(try reader.firstExchange(after: 1, url: "https://api.test/v1/3") == 3)
    }

    @Test("The JSON event and the console line carry the link; a record without one encodes no field")
    func recordFields() throws {
        let replay = Self.exchange(2, replayOf: 12)
        let json = String(decoding: try JSONEncoder().encode(replay), as: UTF8.self)
        #expect(json.contains("\"replayOf\":12"))
        #expect(try JSONDecoder().decode(ExchangeSummary.self, from: Data(json.utf8)).replayOf == 12)
        #expect(!String(decoding: try JSONEncoder().encode(Self.exchange(1, replayOf: nil)), as: UTF8.self)
            .contains("replayOf"))
        #expect(replay.consoleLine(colour: false).hasSuffix("(replay of #12)"))
    }

    @Test("A capture made before the column has no replays; a run appending to it adds the column")
    func captureWithoutTheColumn() throws {
        let path = try TestScratch.folder("capture-replay-v2").appendingPathComponent("old.atscap").path
        // A file of the release before: steps 1 and 2.
        var v2 = DatabaseMigrator()
        v2.registerMigration(CaptureSchema.Step.tables) { db in
            try db.execute(sql: "PRAGMA application_id = \(CaptureSchema.applicationID)")
            try db.execute(sql: CaptureSchema.tables)
        }
        v2.registerMigration(CaptureSchema.Step.appliedRules) { db in
            try db.execute(sql: ExchangeField.rules.addColumnSQL(postgres: false))
        }
        let queue = try DatabaseQueue(path: path)
        try v2.migrate(queue)
        try queue.write { db in
            try db.execute(sql: """
                INSERT INTO runs (id, started, atsproxy_version, body_limit, settings) VALUES (1, 1, 'old', 0, '[]');
                INSERT INTO exchanges (run_id, started, ended, method, url, host, http_version, outcome, errors,
                    request_bytes, response_bytes, duration_ms)
                VALUES (1, 1, 2, 'GET', 'https://old.test/', 'old.test', 'HTTP/1.1', 'allowed', '', 0, 0, 1);
                """)
        }
        try queue.close()
        let columns = try CaptureRulesTests.columns(path)
        #expect(!columns.contains("replay_of"))

        let reader = try CaptureReader(path: path)
        #expect(try reader.exchange(id: 1)?.record.replayOf == nil)
        #expect(try reader.summaries().first?.record.replayOf == nil)
        #expect(try reader.replay(of: 1, after: 0) == nil)
        try reader.close()
        #expect(try CaptureRulesTests.columns(path) == columns, "reading changes nothing")

        let writer = try CaptureWriter.open(path: path, run: CaptureRulesTests.run)
        try writer.write([.exchange(Self.exchange(2, replayOf: 1))])
        try writer.close(ended: 5)
        #expect(try CaptureRulesTests.columns(path) == columns + ["replay_of"])
        let after = try CaptureReader(path: path)
        #expect(try after.exchanges(after: nil).map(\.record.replayOf) == [nil, 1])
        #expect(try after.replay(of: 1, after: 0) == 2)
    }
}
