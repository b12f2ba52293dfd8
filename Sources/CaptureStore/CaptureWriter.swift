import ATSPolicy
import Foundation
import GRDB
import ProxyTrace

/// Writes exchange records and trace records into a capture file, one transaction per batch. Used from one thread
/// at a time (the capture sink's writer thread): SQLite's I/O never runs on an event loop.
///
/// The file is in WAL mode while a run writes (a batch's commit appends to the log; readers such as a live view
/// are not blocked), with `synchronous = NORMAL`: a committed batch survives the proxy being killed. `close()`
/// folds the log back into the file and leaves it in rollback-journal mode, one self-contained file that opens
/// read-only anywhere (a WAL file needs its `-shm` beside it, writable).
public final class CaptureWriter: @unchecked Sendable {
    // @unchecked: one thread at a time uses a writer (documented); GRDB's queue serialises its own access.
    public let path: String
    public let runID: Int64
    private let queue: DatabaseQueue
    /// Exchanges committed by this writer.
    public private(set) var exchangesWritten = 0
    /// Rows written once and referred to by id, remembered so each is stored once. Bounded: emptied when full,
    /// after which a value seen again is simply stored again.
    private var decisionIDs: [DecisionKey: Int64] = [:]
    private var handshakeIDs: [HandshakeFacts: Int64] = [:]
    private var connections: [UInt64: ConnectionFacts] = [:]
    private static let cacheLimit = 4096
    private let encoder = JSONEncoder()

    /// Opens `path` for a run: creates a new capture (mode 0600: bodies may hold secrets), fills an empty file, or
    /// appends a run to an existing capture after checking it (a capture this build can read, intact). Anything
    /// else is refused before a byte is written.
    public static func open(path: String, run: CaptureRunInfo) throws(CaptureFileError) -> CaptureWriter {
        switch try CaptureFile.find(path) {
        case .nothing:
            let fd = Foundation.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw CaptureFileError(path: path, problem: .cannotOpen(Self.createFailure(path))) }
            Foundation.close(fd)
        case .emptyFile:
            break
        case .sqlite:
            let check = try CaptureFile.openReadOnly(path)
            do {
                try check.read { db in try CaptureFile.check(db, path: path, thorough: true) }
            } catch let error as CaptureFileError {
                throw error
            } catch {
                throw CaptureFileError.reading(path, error)
            }
            do { try check.close() } catch { throw CaptureFileError.reading(path, error) }
        }
        var configuration = Configuration()
        configuration.label = "atsproxy.capture.writer"
        let queue: DatabaseQueue
        do { queue = try DatabaseQueue(path: path, configuration: configuration) } catch {
            throw CaptureFileError.reading(path, error)
        }
        do {
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            try CaptureSchema.migrator.migrate(queue)
            let runID = try queue.write { db in
                try db.execute(
                    sql: "INSERT INTO runs (started, atsproxy_version, body_limit, settings) VALUES (?, ?, ?, ?)",
                    arguments: [
                        run.started, run.atsproxyVersion, run.bodyLimit,
                        JSONText.pairs(run.settings.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }),
                    ])
                return db.lastInsertedRowID
            }
            return CaptureWriter(path: path, queue: queue, runID: runID)
        } catch {
            throw CaptureFileError.writing(path, error)
        }
    }

    private init(path: String, queue: DatabaseQueue, runID: Int64) {
        self.path = path
        self.queue = queue
        self.runID = runID
        encoder.outputFormatting = [.sortedKeys]
    }

    private static func createFailure(_ path: String) -> String {
        let code = errno
        let folder = (path as NSString).deletingLastPathComponent
        let shown = folder.isEmpty ? "." : folder
        switch code {
        case ENOENT: return "the directory \(shown) does not exist"
        case EACCES, EPERM: return "permission denied"
        case EROFS: return "\(shown) is on a read-only file system"
        default: return String(cString: strerror(code))
        }
    }

    /// Writes `items` in one transaction: all of them are in the file afterwards, or (on an error) none, and every
    /// earlier batch stays.
    public func write(_ items: some Collection<CaptureItem>) throws(CaptureFileError) {
        guard !items.isEmpty else { return }
        var exchanges = 0
        do {
            try queue.write { db in
                for item in items {
                    switch item {
                    case .exchange(let exchange):
                        try insert(exchange, db)
                        exchanges += 1
                    case .trace(let record, let time):
                        try insert(record, time: time, db)
                    }
                }
            }
        } catch {
            // The transaction rolled back: ids remembered during it may name rows that are not there.
            decisionIDs.removeAll()
            handshakeIDs.removeAll()
            connections.removeAll()
            throw CaptureFileError.writing(path, error)
        }
        exchangesWritten += exchanges
    }

    /// Ends the run (its `ended` time), folds the write-ahead log into the file and closes it. After a failed
    /// write the log may stay beside the file: SQLite reads it back on the next open, so nothing committed is lost.
    public func close(ended: Double) throws(CaptureFileError) {
        do {
            try queue.write { db in
                try db.execute(sql: "UPDATE runs SET ended = ? WHERE id = ?", arguments: [ended, runID])
            }
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
            }
            try queue.close()
        } catch {
            throw CaptureFileError.writing(path, error)
        }
    }

    // MARK: - Rows

    private func insert(_ e: ExchangeSummary, _ db: Database) throws {
        let connection = e.connection
        if let connection { try upsertConnection(connection, db) }
        let decisionRow: Int64? = try connection.flatMap { c in try self.decisionID(c.decision, c.violations, db) }
        let handshakeRow: Int64? = try connection?.upstreamHandshake.map { try self.handshakeID($0, db) }
        let detail = e.detail
        let timings = detail?.timings
        let ended = timings?.ended ?? Date().timeIntervalSince1970
        let started = timings?.started ?? ended - e.durationMilliseconds / 1000
        let upstream = connection?.upstreamTLS
        let first = e.errors.first
        let statement = try db.cachedStatement(sql: """
            INSERT INTO exchanges (run_id, connection_id, started, request_sent, first_response_byte, ended, method,
                url, host, status, http_version, outcome, action, errors, url_error, ssl_error, request_bytes,
                response_bytes, duration_ms, interruption, note, decision_id, handshake_id, upstream_tls_version,
                upstream_tls_suite, upstream_alpn, upstream_sni, upstream_resumed, request_head,
                forwarded_request_head, response_head, client_response_head, upstream_address)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        var values: [DatabaseValue] = []
        values.reserveCapacity(33)
        func add(_ value: (some DatabaseValueConvertible)?) { values.append(value?.databaseValue ?? .null) }
        add(runID)
        add(connection.map { Int64(bitPattern: $0.connectionID) })
        add(started)
        add(timings?.requestSent)
        add(timings?.firstResponseByte)
        add(ended)
        add(e.method)
        add(e.url)
        add(Self.host(of: e.url))
        add(e.status)
        add(e.httpVersion)
        add(e.outcome.rawValue)
        add(e.action?.rawValue)
        add(e.errors.map(\.shortCode).joined(separator: ","))
        add(first?.urlError.code)
        add(first?.sslError?.code)
        add(e.requestBytes)
        add(e.responseBytes)
        add(e.durationMilliseconds)
        add(e.interruption)
        add(e.note)
        add(decisionRow)
        add(handshakeRow)
        add(upstream?.version)
        add(upstream?.cipherSuite)
        add(upstream?.alpn)
        add(upstream?.serverName)
        add(upstream?.resumed)
        add(detail?.request.map(HeadText.request))
        add(detail?.forwardedRequest.map(HeadText.request))
        add(detail?.response.map(HeadText.response))
        add(detail?.clientResponse.map(HeadText.response))
        add(connection?.upstreamAddress)
        try statement.execute(arguments: StatementArguments(values))
        let exchangeID = db.lastInsertedRowID
        if let body = detail?.requestBody { try insertBody(body, direction: "request", exchangeID, db) }
        if let body = detail?.responseBody { try insertBody(body, direction: "response", exchangeID, db) }
    }

    private func insertBody(_ body: CapturedBody, direction: String, _ exchangeID: Int64, _ db: Database) throws {
        // No row for an empty body: the run's body_limit says bodies were kept, and a missing row is zero bytes.
        guard body.totalBytes > 0 else { return }
        let statement = try db.cachedStatement(
            sql: "INSERT INTO bodies (exchange_id, direction, bytes, size, truncated) VALUES (?, ?, ?, ?, ?)")
        try statement.execute(arguments: [exchangeID, direction, Data(body.bytes), body.totalBytes, body.isTruncated])
    }

    private func insert(_ record: DiagnosticsRecord, time: Double, _ db: Database) throws {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO trace_records (run_id, connection_id, time, level, title, subject, fields)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """)
        try statement.execute(arguments: [
            runID, record.connectionID.map { Int64(bitPattern: $0) }, time, record.level, record.title,
            record.subject, JSONText.pairs(record.fields.lazy.map { ($0.key, $0.value) }),
        ])
    }

    private func upsertConnection(_ c: ConnectionRecord, _ db: Database) throws {
        let facts = ConnectionFacts(clientAddress: c.clientAddress, clientTLS: c.clientTLS)
        if connections[c.connectionID] == facts { return }
        if connections.count >= Self.cacheLimit { connections.removeAll() }
        connections[c.connectionID] = facts
        let tls = c.clientTLS
        let statement = try db.cachedStatement(sql: """
            INSERT INTO connections (run_id, connection_id, client_address, client_tls_version, client_tls_suite,
                client_alpn, client_sni, client_resumed, first_seen)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (run_id, connection_id) DO UPDATE SET
                client_address = coalesce(excluded.client_address, client_address),
                client_tls_version = coalesce(excluded.client_tls_version, client_tls_version),
                client_tls_suite = coalesce(excluded.client_tls_suite, client_tls_suite),
                client_alpn = coalesce(excluded.client_alpn, client_alpn),
                client_sni = coalesce(excluded.client_sni, client_sni),
                client_resumed = coalesce(excluded.client_resumed, client_resumed)
            """)
        try statement.execute(arguments: [
            runID, Int64(bitPattern: c.connectionID), c.clientAddress, tls?.version, tls?.cipherSuite, tls?.alpn,
            tls?.serverName, tls?.resumed, Date().timeIntervalSince1970,
        ])
    }

    private func decisionID(_ decision: PolicyDecision?, _ violations: [ATSViolation], _ db: Database) throws -> Int64? {
        guard let decision else { return nil }
        let key = DecisionKey(decision: decision, violations: violations)
        if let id = decisionIDs[key] { return id }
        try db.execute(
            sql: "INSERT INTO decisions (decided_by, key_path, reason, notes, violations) VALUES (?, ?, ?, ?, ?)",
            arguments: [
                decision.keyPathString, JSONText.strings(decision.keyPath), decision.reason, JSONText.strings(decision.notes),
                String(decoding: try encoder.encode(violations), as: UTF8.self),
            ])
        let id = db.lastInsertedRowID
        if decisionIDs.count >= Self.cacheLimit { decisionIDs.removeAll() }
        decisionIDs[key] = id
        return id
    }

    private func handshakeID(_ facts: HandshakeFacts, _ db: Database) throws -> Int64 {
        if let id = handshakeIDs[facts] { return id }
        try db.execute(
            sql: "INSERT INTO handshakes (version, cipher_suite, failure, facts) VALUES (?, ?, ?, ?)",
            arguments: [
                facts.version?.plistName, facts.cipherSuiteName, facts.failure.map { String(describing: $0) },
                String(decoding: try encoder.encode(facts), as: UTF8.self),
            ])
        let id = db.lastInsertedRowID
        if handshakeIDs.count >= Self.cacheLimit { handshakeIDs.removeAll() }
        handshakeIDs[facts] = id
        return id
    }

    /// The host of an exchange's URL, lowercased, without user info or port: `https://A.example:8443/x` →
    /// `a.example`; an authority alone (`example.com:443`, a CONNECT) works too; `[::1]` keeps its brackets off.
    static func host(of url: String) -> String {
        var rest = Substring(url)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        if rest.hasPrefix("["), let close = rest.firstIndex(of: "]") {
            return rest[rest.index(after: rest.startIndex)..<close].lowercased()
        }
        if let colon = rest.lastIndex(of: ":") { rest = rest[..<colon] }
        return rest.lowercased()
    }
}

private struct DecisionKey: Hashable {
    var decision: PolicyDecision
    var violations: [ATSViolation]
}

private struct ConnectionFacts: Equatable {
    var clientAddress: String?
    var clientTLS: TLSLegFacts?
}
