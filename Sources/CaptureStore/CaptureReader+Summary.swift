import ATSPolicy
import Foundation
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
    /// The proxy's own set-up site answered these (`ExchangeAction.proxySite`): not the app's traffic.
    public var proxySite: Bool = false
}

extension CaptureReader {
    /// The id of the newest exchange in the file, 0 when it has none. One index lookup.
    public func latestID() throws(CaptureFileError) -> Int64 {
        try read { db in try Int64.fetchOne(db, sql: "SELECT max(id) FROM exchanges") ?? 0 }
    }

    /// The first exchange for `url` committed after exchange `afterID` (a request written in the web view).
    public func firstExchange(after afterID: Int64, url: String) throws(CaptureFileError) -> Int64? {
        try read { db in
            try Int64.fetchOne(
                db, sql: "SELECT min(id) FROM exchanges WHERE id > ? AND url = ?", arguments: [afterID, url])
        }
    }

    /// The first replay of exchange `original` committed after exchange `afterID` (issue 34: the row a replay just
    /// sent made); nil when there is none yet, or the file predates step "v3 replay of".
    public func replay(of original: Int64, after afterID: Int64) throws(CaptureFileError) -> Int64? {
        guard schemaSteps.contains(CaptureSchema.Step.replayOf) else { return nil }
        return try read { db in
            try Int64.fetchOne(
                db, sql: "SELECT min(id) FROM exchanges WHERE id > ? AND replay_of = ?",
                arguments: [afterID, original])
        }
    }

    /// Exchanges newer than `afterID`, counted by host, verdict and whether the proxy's own set-up site answered
    /// them (`proxySite`, counted apart: a host can be both, e.g. the proxy's own address).
    /// A caller that keeps the totals adds the
    /// counts of what arrived since its last call instead of reading the whole session again. `NOT INDEXED`: the
    /// rows after `afterID` are a range of the table itself; left to choose, SQLite walks the whole `(host, id)`
    /// index for the grouping, which cost 170 ms for no new rows in a capture of a million.
    public func hostCounts(afterID: Int64 = 0) throws(CaptureFileError) -> [CaptureHostCount] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT g.host, g.outcome, g.own, g.n, g.last_id, g.errors, d.decided_by
                    FROM (
                        SELECT host, outcome, coalesce(action = ?, 0) AS own, count(*) AS n, max(id) AS last_id,
                            group_concat(DISTINCT errors) AS errors
                        FROM exchanges NOT INDEXED WHERE id > ? GROUP BY host, outcome, own
                    ) g
                    JOIN exchanges e ON e.id = g.last_id
                    LEFT JOIN decisions d ON d.id = e.decision_id
                    ORDER BY g.host, g.outcome, g.own
                    """,
                arguments: [ExchangeAction.proxySite.rawValue, afterID]
            ).map { row in
                let errors = ((row["errors"] as String?) ?? "").split(separator: ",").map(String.init)
                return CaptureHostCount(
                    host: row["host"],
                    outcome: ExchangeSummary.ATSOutcome(rawValue: row["outcome"]) ?? .notEvaluated,
                    count: row["n"], lastID: row["last_id"], errors: Array(Set(errors)).sorted(),
                    decidedBy: row["decided_by"], proxySite: row["own"] as Bool)
            }
        }
    }
}

extension CaptureReader {
    /// How far from the exchange shown (in rows, i.e. exchanges that ended before or after it) the rows whose
    /// rebuilt records may fall in its time are looked for: more than a connection's concurrent streams.
    static let nearbyExchanges: Int64 = 4096

    /// The trace records shown with `exchange` (`show ID`, the web view's detail): its connection's opening records
    /// and those of the exchange's own time (from just before it started to a quarter second after it ended, where
    /// a connection's closing records fall), at most `limit`. Empty for an exchange of no connection.
    public func traceRecords(of exchange: CapturedExchange, limit: Int = 400) throws(CaptureFileError)
        -> [CapturedTraceRecord]
    {
        guard let connection = exchange.record.connection else { return [] }
        let timings = exchange.record.detail?.timings
        return try traceRecords(
            runID: exchange.runID, connectionID: connection.connectionID, from: (timings?.started ?? 0) - 0.001,
            to: (timings?.ended ?? .infinity) + 0.25, limit: limit, exchangeID: exchange.id)
    }

    /// The trace records of one connection that concern one exchange: the connection's first `opening` records
    /// (its handshake and ATS decision) and those made between `from` and `to`, in order, at most `limit` in all.
    /// A keep-alive connection can carry thousands of exchanges; this reads only what one of them needs.
    ///
    /// The exchanges' own records rebuilt from their rows (`rebuiltTraceRecords(of:)`) are those of this time too,
    /// merged by time; `exchangeID` (the exchange shown) bounds the rows read for them to those near it.
    public func traceRecords(
        runID: Int64, connectionID: UInt64, opening: Int = 20, from: Double, to: Double, limit: Int = 400,
        exchangeID: Int64? = nil
    ) throws(CaptureFileError) -> [CapturedTraceRecord] {
        let connection = Int64(bitPattern: connectionID)
        return try read { db in
            // Records several to a chunk. The connection's first chunks hold its opening records; the chunks whose
            // time span meets the window hold the exchange's.
            var records: [CapturedTraceRecord] = []
            var seen = Set<Int64>()
            var openingLeft = opening
            func add(_ row: Row, opening: Bool) throws {
                guard seen.insert(row["id"]).inserted else { return }
                for captured in try Self.chunkRecords(row, connectionID: connectionID) {
                    let isOpening = opening && openingLeft > 0
                    if isOpening { openingLeft -= 1 }
                    guard isOpening || (captured.time >= from && captured.time <= to) else { continue }
                    records.append(captured)
                }
            }
            for row in try Row.fetchAll(
                db, sql: "SELECT id, records FROM trace_chunks WHERE run_id = ? AND connection_id = ? ORDER BY id LIMIT ?",
                arguments: [runID, connection, max(1, opening)])
            where openingLeft > 0 {
                try add(row, opening: true)
            }
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT id, records FROM trace_chunks
                    WHERE run_id = ? AND connection_id = ? AND last_time >= ? AND first_time <= ? ORDER BY id LIMIT ?
                    """,
                arguments: [runID, connection, from, to, limit])
            {
                try add(row, opening: false)
            }
            records.sort { $0.id < $1.id }
            let rebuilt = try rebuiltTraceRecords(
                db, runID: runID, connectionID: connectionID, from: from, to: to,
                ids: exchangeID.map { $0 - Self.nearbyExchanges ... $0 + Self.nearbyExchanges }
            ).filter { $0.time >= from && $0.time <= to }
            return Array(Self.merged(records, rebuilt).prefix(limit))
        }
    }
}

extension CaptureReader {
    /// Like `exchanges(matching:limit:before:after:)`, but only what a list row shows: the console line's fields,
    /// the action and the start time. No join and no JSON to decode (the decision, the handshake's chain), which
    /// were most of the time of a page of 200 rows.
    public func summaries(
        matching filter: CaptureFilter = CaptureFilter(), limit: Int = 100, before: Int64? = nil, after: Int64? = nil
    ) throws(CaptureFileError) -> [CapturedExchange] {
        var (clause, arguments) = Self.whereClause(filter)
        if let before {
            clause += clause.isEmpty ? " WHERE " : " AND "
            clause += "e.id < ?"
            _ = arguments.append(contentsOf: [before])
        }
        if let after {
            clause += clause.isEmpty ? " WHERE " : " AND "
            clause += "e.id > ?"
            _ = arguments.append(contentsOf: [after])
        }
        _ = arguments.append(contentsOf: [limit])
        let order = after == nil ? " ORDER BY e.id DESC LIMIT ?" : " ORDER BY e.id ASC LIMIT ?"
        // A file made before step "v2 applied rules" has no `rules` column: NULL in its place.
        let rules = schemaSteps.contains(CaptureSchema.Step.appliedRules) ? "e.rules" : "NULL AS rules"
        let replayOf = schemaSteps.contains(CaptureSchema.Step.replayOf) ? "e.replay_of" : "NULL AS replay_of"
        let sql = """
            SELECT e.id, e.run_id, e.started, e.ended, e.method, e.url, e.status, e.http_version, e.outcome, e.action,
                e.errors, e.request_bytes, e.response_bytes, e.duration_ms, e.interruption, e.note, \(rules),
                \(replayOf)
            FROM exchanges e
            """
        // No status index: a range walks the table newest first (or, from 400 up, reads the problems' index).
        return try read { db in
            try Row.fetchAll(db, sql: sql + clause + order, arguments: arguments).map { row in
                var record = ExchangeSummary(
                    method: row["method"], url: row["url"], status: row["status"], httpVersion: row["http_version"],
                    outcome: ExchangeSummary.ATSOutcome(rawValue: row["outcome"]) ?? .notEvaluated,
                    errors: Self.summaryErrors(row["errors"]), requestBytes: row["request_bytes"],
                    responseBytes: row["response_bytes"], durationMilliseconds: row["duration_ms"],
                    interruption: row["interruption"], note: row["note"])
                record.kind = .recorded(method: record.method, version: record.httpVersion)
                record.action = (row["action"] as String?).flatMap(ExchangeAction.init(rawValue:))
                record.detail = ExchangeDetail(timings: ExchangeTimings(started: row["started"], ended: row["ended"]))
                if let rules = row["rules"] as String? {
                    record.rules = try JSONDecoder().decode([AppliedRule].self, from: Data(rules.utf8))
                }
                record.replayOf = row["replay_of"]
                return CapturedExchange(id: row["id"], runID: row["run_id"], record: record)
            }
        }
    }
}

extension CaptureReader {
    /// The `errors` column (`-1200/-9836,-1022`) as the record's errors.
    fileprivate static func summaryErrors(_ text: String) -> [ExchangeError] {
        text.split(separator: ",").compactMap { token in
            let codes = token.split(separator: "/")
            guard let url = codes.first.flatMap({ Int($0) }) else { return nil }
            return ExchangeError(
                urlError: URLErrorCode(url), sslError: codes.count > 1 ? Int(codes[1]).map(SSLErrorCode.init) : nil)
        }
    }
}
