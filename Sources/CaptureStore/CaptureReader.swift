import ATSPolicy
import Foundation
import GRDB
import HTTP1Core
import ProxyTrace

/// One stored exchange: its id in the file, its run, and the exchange record as the proxy emitted it (heads,
/// timings, TLS facts, decision, action; bodies when read one at a time).
public struct CapturedExchange: Sendable {
    public var id: Int64
    public var runID: Int64
    public var record: ExchangeSummary
}

/// One run stored in a capture.
public struct CapturedRun: Sendable, Equatable {
    public var id: Int64
    public var started: Double
    public var ended: Double?
    public var atsproxyVersion: String
    public var bodyLimit: Int
    public var settings: [String: String]
}

/// One stored trace record.
public struct CapturedTraceRecord: Sendable, Equatable {
    /// Increases in the order a connection's records were made: the `trace_chunks` row id × 65,536 plus the
    /// record's place in the chunk (negative for records rebuilt from an exchange's row).
    public var id: Int64
    public var time: Double
    public var record: DiagnosticsRecord
}

/// Reads a capture file, read-only: opening it checks that it is a capture this build can read, and nothing the
/// reader does changes the file. Errors name the file and the problem.
public final class CaptureReader: @unchecked Sendable {
    // @unchecked: GRDB's queue serialises every access; the other properties are constants.
    public let path: String
    /// The schema steps the file has (a file of an older release may lack later ones; it reads all the same).
    public let schemaSteps: [String]
    private let queue: DatabaseQueue
    private let decoder = JSONDecoder()

    public init(path: String) throws(CaptureFileError) {
        switch try CaptureFile.find(path) {
        case .nothing: throw CaptureFileError(path: path, problem: .missing)
        case .emptyFile: throw CaptureFileError(path: path, problem: .empty)
        case .sqlite: break
        }
        self.path = path
        queue = try CaptureFile.openReadOnly(path)
        do {
            schemaSteps = try queue.read { db in
                try CaptureFile.check(db, path: path, thorough: false)
                return try CaptureSchema.migrator.appliedMigrations(db)
            }
        } catch let error as CaptureFileError {
            throw error
        } catch {
            throw CaptureFileError.reading(path, error)
        }
    }

    /// Closes the file; later reads fail with an error naming it. A reader of a capture that a run is writing
    /// closes before the run does: the run's last step (folding the write-ahead log back into the file) needs to be
    /// the file's only connection.
    public func close() throws(CaptureFileError) {
        do { try queue.close() } catch { throw CaptureFileError.reading(path, error) }
    }

    /// Runs SQL on the file, mapping errors to `CaptureFileError` (internal: reader extensions in other files use it).
    func read<T>(_ body: (Database) throws -> T) throws(CaptureFileError) -> T {
        do { return try queue.read(body) } catch let error as CaptureFileError { throw error } catch {
            throw CaptureFileError.reading(path, error)
        }
    }

    public func runs() throws(CaptureFileError) -> [CapturedRun] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM runs ORDER BY id").map { row in
                CapturedRun(
                    id: row["id"], started: row["started"], ended: row["ended"],
                    atsproxyVersion: row["atsproxy_version"], bodyLimit: row["body_limit"],
                    settings: Dictionary(
                        try Self.pairs(row["settings"]).map { ($0.0, $0.1) }, uniquingKeysWith: { _, b in b }))
            }
        }
    }

    /// How many exchanges match `filter`.
    public func count(matching filter: CaptureFilter = CaptureFilter()) throws(CaptureFileError) -> Int {
        let (clause, arguments) = Self.whereClause(filter)
        return try read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM exchanges e" + clause, arguments: arguments) ?? 0
        }
    }

    /// Exchanges matching `filter`, newest first, at most `limit`, older than the exchange `before` when given
    /// (the next page). Without bodies: `exchange(id:)` reads one with them.
    public func exchanges(
        matching filter: CaptureFilter = CaptureFilter(), limit: Int = 100, before: Int64? = nil
    ) throws(CaptureFileError) -> [CapturedExchange] {
        try page(filter, limit: limit, from: before.map { ("<", $0) }, order: "DESC")
    }

    /// Exchanges matching `filter`, oldest first, at most `limit`, newer than the exchange `after` (nil: from the
    /// first): exports, which want the order things happened, page through a file with it.
    public func exchanges(
        matching filter: CaptureFilter = CaptureFilter(), limit: Int = 100, after: Int64?
    ) throws(CaptureFileError) -> [CapturedExchange] {
        try page(filter, limit: limit, from: after.map { (">", $0) }, order: "ASC")
    }

    /// One page of a listing: the exchanges matching `filter` past the id `from` (`<` or `>` it), in id `order`.
    private func page(_ filter: CaptureFilter, limit: Int, from: (comparison: String, id: Int64)?, order: String)
        throws(CaptureFileError) -> [CapturedExchange]
    {
        var (clause, arguments) = Self.whereClause(filter)
        if let from {
            clause += (clause.isEmpty ? " WHERE " : " AND ") + "e.id \(from.comparison) ?"
            _ = arguments.append(contentsOf: [from.id])
        }
        _ = arguments.append(contentsOf: [limit])
        return try read { db in
            try Row.fetchAll(
                db.cachedStatement(sql: Self.select + clause + " ORDER BY e.id \(order) LIMIT ?"), arguments: arguments)
                .map { try exchange(from: $0) }
        }
    }

    /// One exchange with its bodies, or nil when the file has no exchange `id`.
    public func exchange(id: Int64) throws(CaptureFileError) -> CapturedExchange? {
        try read { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: Self.select + " WHERE e.id = ?"), arguments: [id])
            else { return nil }
            return try addBodies(to: exchange(from: row), db)
        }
    }

    /// `exchange` (from a listing, which reads no bodies) with its bodies: an export reads a page of exchanges,
    /// then each one's bodies, without reading its row again.
    public func withBodies(_ exchange: CapturedExchange) throws(CaptureFileError) -> CapturedExchange {
        try read { db in try addBodies(to: exchange, db) }
    }

    private func addBodies(to exchange: CapturedExchange, _ db: Database) throws -> CapturedExchange {
        var exchange = exchange
        let bodyLimit = try Int.fetchOne(
            db.cachedStatement(sql: "SELECT body_limit FROM runs WHERE id = ?"), arguments: [exchange.runID]) ?? 0
        guard bodyLimit > 0 else { return exchange }
        var request = CapturedBody(bytes: [], totalBytes: 0)
        var response = CapturedBody(bytes: [], totalBytes: 0)
        let sql = "SELECT id % 2 AS response, bytes, size FROM exchange_bodies WHERE id IN (?, ?)"
        for body in try Row.fetchAll(
            db.cachedStatement(sql: sql), arguments: [exchange.id * 2, exchange.id * 2 + 1])
        {
            let data: Data = body["bytes"]
            let captured = CapturedBody(bytes: Array(data), totalBytes: body["size"])
            if body["response"] as Bool { response = captured } else { request = captured }
        }
        exchange.record.detail?.requestBody = request
        exchange.record.detail?.responseBody = response
        return exchange
    }

    /// The trace records of one connection of one run, in the order they were made (by time, for the exchanges'
    /// own records rebuilt from their rows: `rebuiltTraceRecords(of:)`).
    public func traceRecords(runID: Int64, connectionID: UInt64) throws(CaptureFileError) -> [CapturedTraceRecord] {
        try read { db in
            var records: [CapturedTraceRecord] = []
            for row in try Row.fetchAll(
                db, sql: "SELECT id, records FROM trace_chunks WHERE run_id = ? AND connection_id = ? ORDER BY id",
                arguments: [runID, Int64(bitPattern: connectionID)])
            {
                records += try Self.chunkRecords(row, connectionID: connectionID)
            }
            return Self.merged(records, try rebuiltTraceRecords(db, runID: runID, connectionID: connectionID))
        }
    }

    // MARK: - Rows to records

    /// The records of a `trace_chunks` row (`id`, `records`), in order, each with the id chunk id × 65,536 plus its
    /// place in the chunk.
    static func chunkRecords(_ row: Row, connectionID: UInt64) throws -> [CapturedTraceRecord] {
        let chunkID: Int64 = row["id"]
        return try TraceChunk.decode(row["records"]).enumerated().map { i, item in
            var record = item.record
            record.connectionID = connectionID
            return CapturedTraceRecord(id: chunkID << 16 | Int64(i), time: item.time, record: record)
        }
    }

    static let select = """
        SELECT e.*, d.key_path AS d_key_path, d.reason AS d_reason, d.notes AS d_notes,
            d.violations AS d_violations, h.facts AS h_facts, c.client_address AS c_client_address,
            c.client_tls_version AS c_version, c.client_tls_suite AS c_suite, c.client_alpn AS c_alpn,
            c.client_sni AS c_sni, c.client_resumed AS c_resumed
        FROM exchanges e
        LEFT JOIN decisions d ON d.id = e.decision_id
        LEFT JOIN handshakes h ON h.id = e.handshake_id
        LEFT JOIN connections c ON c.run_id = e.run_id AND c.connection_id = e.connection_id
        """

    static func whereClause(_ filter: CaptureFilter) -> (String, StatementArguments) {
        var sql = CaptureFilter.SQL()
        filter.compile(into: &sql)
        return (sql.conditions.isEmpty ? "" : " WHERE " + sql.conditions.joined(separator: " AND "), sql.arguments)
    }

    func exchange(from row: Row) throws -> CapturedExchange {
        let errors: [ExchangeError] = (row["errors"] as String).split(separator: ",").compactMap { token in
            let codes = token.split(separator: "/")
            guard let url = codes.first.flatMap({ Int($0) }) else { return nil }
            return ExchangeError(
                urlError: URLErrorCode(url), sslError: codes.count > 1 ? Int(codes[1]).map(SSLErrorCode.init) : nil)
        }
        var record = ExchangeSummary(
            method: row["method"], url: row["url"], status: row["status"], httpVersion: row["http_version"],
            outcome: ExchangeSummary.ATSOutcome(rawValue: row["outcome"]) ?? .notEvaluated, errors: errors,
            requestBytes: row["request_bytes"], responseBytes: row["response_bytes"],
            durationMilliseconds: row["duration_ms"], interruption: row["interruption"], note: row["note"])
        record.kind = .recorded(method: record.method, version: record.httpVersion)
        record.action = (row["action"] as String?).flatMap(ExchangeAction.init(rawValue:))
        if let mirror = row["mirror"] as String? {
            record.mirror = try decoder.decode(MirrorRecord.self, from: Data(mirror.utf8))
        }
        // Absent from files made before step "v2 applied rules": read as none.
        if let rules = row["rules"] as String? {
            record.rules = try decoder.decode([AppliedRule].self, from: Data(rules.utf8))
        }
        // Absent from files made before step "v3 replay of" (`e.*` has no such column): not a replay.
        if row.hasColumn("replay_of") { record.replayOf = row["replay_of"] }
        if let connectionID = row["connection_id"] as Int64? {
            var decision: PolicyDecision?
            var violations: [ATSViolation] = []
            if let keyPath = row["d_key_path"] as String? {
                decision = PolicyDecision(
                    keyPath: try decoder.decode([String].self, from: Data(keyPath.utf8)), reason: row["d_reason"],
                    notes: try decoder.decode([String].self, from: Data((row["d_notes"] as String).utf8)))
                violations = try decoder.decode([ATSViolation].self, from: Data((row["d_violations"] as String).utf8))
            }
            let facts = try (row["h_facts"] as String?).map {
                try decoder.decode(HandshakeFacts.self, from: Data($0.utf8))
            }
            let clientTLS: TLSLegFacts? =
                (row["c_version"] as String?) == nil && (row["c_alpn"] as String?) == nil
                ? nil
                : TLSLegFacts(
                    version: row["c_version"], cipherSuite: row["c_suite"], alpn: row["c_alpn"], serverName: row["c_sni"],
                    resumed: (row["c_resumed"] as Bool?) ?? false)
            let upstreamTLS: TLSLegFacts? =
                (row["upstream_tls_version"] as String?) == nil
                ? nil
                : TLSLegFacts(
                    version: row["upstream_tls_version"], cipherSuite: row["upstream_tls_suite"],
                    alpn: row["upstream_alpn"], serverName: row["upstream_sni"],
                    resumed: (row["upstream_resumed"] as Bool?) ?? false)
            record.connection = ConnectionRecord(
                connectionID: UInt64(bitPattern: connectionID), clientAddress: row["c_client_address"],
                upstreamAddress: row["upstream_address"], clientTLS: clientTLS, upstreamTLS: upstreamTLS,
                upstreamHandshake: facts, decision: decision, violations: violations)
        }
        record.detail = ExchangeDetail(
            request: (row["request_head"] as String?).flatMap(HeadText.parseRequest),
            forwardedRequest: (row["forwarded_request_head"] as String?).flatMap(HeadText.parseRequest),
            response: (row["response_head"] as String?).flatMap(HeadText.parseResponse),
            clientResponse: (row["client_response_head"] as String?).flatMap(HeadText.parseResponse),
            timings: ExchangeTimings(
                started: row["started"], requestSent: row["request_sent"],
                firstResponseByte: row["first_response_byte"], ended: row["ended"]))
        // NULL: the exchange's records are stored.
        if let bits = row["rebuilt_trace"] as Int? { record.detail?.rebuiltTrace = RebuiltTrace(rawValue: bits) }
        return CapturedExchange(id: row["id"], runID: row["run_id"], record: record)
    }

    /// `[[key, value], …]` as the writer stores it.
    static func pairs(_ json: String) throws -> [(String, String)] {
        try JSONDecoder().decode([[String]].self, from: Data(json.utf8)).compactMap { pair in
            pair.count == 2 ? (pair[0], pair[1]) : nil
        }
    }
}
