import GRDB
import ProxyTrace

/// How many exchanges of one host ended with one verdict, for the live view's per-host summary.
public struct CaptureHostCount: Sendable, Equatable {
    public var host: String
    public var outcome: ExchangeSummary.ATSOutcome
    public var count: Int
    /// The newest exchange of this host with this verdict.
    public var lastID: Int64
    /// The distinct error codes seen (`-1200/-9836`), in no particular order.
    public var errors: [String]
    /// The plist entry that decided the newest of them (`NSExceptionDomains › example.com`; empty for ATS
    /// defaults), nil when none was judged.
    public var decidedBy: String?
}

extension CaptureReader {
    /// The id of the newest exchange in the file, 0 when it has none. One index lookup.
    public func latestID() throws(CaptureFileError) -> Int64 {
        try read { db in try Int64.fetchOne(db, sql: "SELECT max(id) FROM exchanges") ?? 0 }
    }

    /// Exchanges newer than `afterID`, counted by host and verdict. A caller that keeps the totals adds the
    /// counts of what arrived since its last call instead of reading the whole session again.
    public func hostCounts(afterID: Int64 = 0) throws(CaptureFileError) -> [CaptureHostCount] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT g.host, g.outcome, g.n, g.last_id, g.errors, d.decided_by
                    FROM (
                        SELECT host, outcome, count(*) AS n, max(id) AS last_id, group_concat(DISTINCT errors) AS errors
                        FROM exchanges WHERE id > ? GROUP BY host, outcome
                    ) g
                    JOIN exchanges e ON e.id = g.last_id
                    LEFT JOIN decisions d ON d.id = e.decision_id
                    ORDER BY g.host, g.outcome
                    """,
                arguments: [afterID]
            ).map { row in
                let errors = ((row["errors"] as String?) ?? "").split(separator: ",").map(String.init)
                return CaptureHostCount(
                    host: row["host"],
                    outcome: ExchangeSummary.ATSOutcome(rawValue: row["outcome"]) ?? .notEvaluated,
                    count: row["n"], lastID: row["last_id"], errors: Array(Set(errors)).sorted(),
                    decidedBy: row["decided_by"])
            }
        }
    }
}
