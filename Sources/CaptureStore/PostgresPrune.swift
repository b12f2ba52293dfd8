import Foundation

/// Retention for the team store (`atsproxy capture prune URL --older-than 30d`): removes whole runs whose last
/// exchange ended (or, with none, that started) before a cutoff, with everything that is theirs: exchanges,
/// bodies, connections, trace chunks, and the decision and handshake rows their writer made (each writer makes
/// its own, so no other run refers to them). One transaction per run: a prune cut off halfway leaves whole runs,
/// and proxies writing meanwhile are not held up by one long transaction.
public enum PostgresPrune {
    public struct Result: Sendable, Equatable {
        public var runs = 0
        public var exchanges = 0
    }

    /// Prunes runs older than `cutoff` (Unix seconds); `progress` is told runs done and their total.
    public static func prune(
        _ target: PostgresLocation, olderThan cutoff: Double, progress: ((Int, Int) -> Void)? = nil
    ) throws(CaptureFileError) -> Result {
        do throws(PostgresError) {
            let connection = try PostgresConnection(target, applicationName: "atsproxy prune")
            defer { connection.close() }
            let runs = try connection.execute(
                """
                SELECT r.id FROM runs r
                WHERE coalesce((SELECT max(e.ended) FROM exchanges e WHERE e.run_id = r.id), r.ended, r.started) < $1
                ORDER BY r.id
                """, [PostgresValue(cutoff)]
            ).rows.compactMap { $0[0].flatMap { Int64($0) } }
            var result = Result()
            for (index, run) in runs.enumerated() {
                result.exchanges += try removeRun(run, connection)
                result.runs += 1
                progress?(index + 1, runs.count)
            }
            return result
        } catch {
            throw CaptureFileError(path: target.redacted, problem: .cannotWrite(error.message))
        }
    }

    /// Removes one run and everything that is its own, in one transaction; returns how many exchanges went.
    static func removeRun(_ run: Int64, _ connection: PostgresConnection) throws(PostgresError) -> Int {
        let id = [PostgresValue(run)]
        try connection.execute("BEGIN")
        do throws(PostgresError) {
            let references = try connection.execute(
                "SELECT DISTINCT decision_id, handshake_id FROM exchanges WHERE run_id = $1", id).rows
            let decisions = Set(references.compactMap { $0[0] }).sorted()
            let handshakes = Set(references.compactMap { $0[1] }).sorted()
            try connection.execute(
                """
                DELETE FROM exchange_bodies WHERE id IN (
                    SELECT id * 2 FROM exchanges WHERE run_id = $1 UNION ALL SELECT id * 2 + 1 FROM exchanges WHERE run_id = $1)
                """, id)
            let exchanges = Int(try connection.execute(
                "WITH gone AS (DELETE FROM exchanges WHERE run_id = $1 RETURNING 1) SELECT count(*) FROM gone", id
            ).scalar ?? "0") ?? 0
            // The run's connections and trace chunks go with it (ON DELETE CASCADE).
            try connection.execute("DELETE FROM runs WHERE id = $1", id)
            try connection.execute(
                "DELETE FROM decisions WHERE id = ANY($1::bigint[])", [.text("{" + decisions.joined(separator: ",") + "}")])
            try connection.execute(
                "DELETE FROM handshakes WHERE id = ANY($1::bigint[])", [.text("{" + handshakes.joined(separator: ",") + "}")])
            try connection.execute("COMMIT")
            return exchanges
        } catch {
            connection.rollback()
            throw error
        }
    }
}
