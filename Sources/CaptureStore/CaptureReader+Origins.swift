import ATSPolicy
import Foundation
import GRDB
import ProxyTrace

/// The exchanges of a capture folded by origin and server behaviour: what `atsproxy report` judges a policy
/// against. One row per origin and distinct upstream handshake facts, the time they were taken aside (each
/// connection's handshake is stored with its own time), with the latest time kept.
public struct CapturedOrigin: Sendable {
    /// `scheme://host[:port]` as the URLs spell it, or the bare `host:port` of a tunnel whose client did not speak TLS.
    public var origin: String
    /// The first URL (by id) of the group: what `explain` is asked about.
    public var sampleURL: String
    /// The host column: lowercased, without port.
    public var host: String
    /// The upstream handshake's facts, when the proxy intercepted and shook hands with the server.
    public var handshake: HandshakeFacts?
    /// Exchanges in the group.
    public var exchanges: Int
    /// Exchanges the proxy tunnelled without intercepting (it saw no upstream TLS).
    public var tunnelled: Int
    /// Exchanges whose upstream could not be reached (a network failure, not a verdict).
    public var unreachable: Int
}

extension CaptureReader {
    /// How many exchanges the proxy's own set-up site answered (`ExchangeAction.proxySite`), which `observedOrigins`
    /// leaves out; one run when `runID` is given.
    public func proxySiteCount(runID: Int64? = nil) throws(CaptureFileError) -> Int {
        try count(of: .proxySite, runID: runID)
    }

    /// How many exchanges a rule failed on purpose (`ExchangeAction.injected`: `--fault`, `--block-list`), which
    /// `observedOrigins` leaves out; one run when `runID` is given.
    public func injectedCount(runID: Int64? = nil) throws(CaptureFileError) -> Int {
        try count(of: .injected, runID: runID)
    }

    private func count(of action: ExchangeAction, runID: Int64?) throws(CaptureFileError) -> Int {
        try read { db in
            try Int.fetchOne(
                db,
                sql: "SELECT count(*) FROM exchanges WHERE action = ?" + (runID == nil ? "" : " AND run_id = ?"),
                arguments: StatementArguments([action.rawValue] + (runID.map { [$0] } ?? []))) ?? 0
        }
    }

    /// Every origin the capture saw, with each distinct upstream handshake and how many exchanges used it. Grouped in
    /// SQL, so a million exchanges come back as a few rows per server; one run when `runID` is given. The proxy's own
    /// set-up site (`ExchangeAction.proxySite`) is not the app's traffic and is left out, and so are failures a rule
    /// injected (`ExchangeAction.injected`).
    public func observedOrigins(runID: Int64? = nil) throws(CaptureFileError) -> [CapturedOrigin] {
        // The origin is the URL up to the first "/" after "://" (the whole URL when it has no scheme).
        let rest = "substr(e.url, instr(e.url, '://') + 3)"
        let origin = """
            CASE WHEN instr(e.url, '://') = 0 THEN e.url
            ELSE substr(e.url, 1, instr(e.url, '://') + 2
                + CASE WHEN instr(\(rest), '/') = 0 THEN length(\(rest)) ELSE instr(\(rest), '/') - 1 END)
            END
            """
        // Failures a rule injected are the proxy's doing, not the server's: no finding about the policy.
        let own = "(e.action IS NULL OR e.action NOT IN ('\(ExchangeAction.proxySite.rawValue)', "
            + "'\(ExchangeAction.injected.rawValue)'))"
        let filter = runID == nil ? " WHERE \(own)" : " WHERE e.run_id = ? AND \(own)"
        // Facts are grouped without their time (SQLite's JSON functions), so a capture of many short connections
        // to one server comes back as one row, not one per connection.
        let sql = """
            SELECT \(origin) AS origin, min(e.id) AS first_id, e.host AS host,
                json_set(json_remove(h.facts, '$.observedAt'), '$.observedAt',
                    max(json_extract(h.facts, '$.observedAt'))) AS facts,
                count(*) AS n, sum(e.http_version = 'TUNNEL' AND e.outcome != 'failed') AS tunnelled,
                sum(e.outcome = 'failed') AS unreachable
            FROM exchanges e LEFT JOIN handshakes h ON h.id = e.handshake_id\(filter)
            GROUP BY origin, json_remove(h.facts, '$.observedAt')
            ORDER BY first_id
            """
        let decoder = JSONDecoder()
        return try read { db in
            let rows = try Row.fetchAll(db, sql: sql, arguments: runID.map { [$0] } ?? [])
            return try rows.map { row in
                let firstID: Int64 = row["first_id"]
                let sample = try String.fetchOne(db, sql: "SELECT url FROM exchanges WHERE id = ?", arguments: [firstID])
                let facts = try (row["facts"] as String?).map { try decoder.decode(HandshakeFacts.self, from: Data($0.utf8)) }
                return CapturedOrigin(
                    origin: row["origin"], sampleURL: sample ?? row["origin"], host: row["host"], handshake: facts,
                    exchanges: row["n"], tunnelled: row["tunnelled"], unreachable: row["unreachable"])
            }
        }
    }
}
