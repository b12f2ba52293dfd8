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
    /// The decision and handshake rows each connection's last exchange referred to: a connection's exchanges share
    /// them, and comparing with the last (the same storage, so `==` is quick) saves hashing a whole certificate
    /// chain per exchange.
    private var lastReferences: [UInt64: References] = [:]
    private static let cacheLimit = 4096
    private let encoder = JSONEncoder()
    /// The batch's trace records, per connection (nil: records of no connection), as chunk bytes; written at the end
    /// of the batch, a row per connection.
    private var pendingTrace: [UInt64?: PendingChunk] = [:]
    private var pendingOrder: [UInt64?] = []
    /// Bytes of one text value being assembled (a head, a host), reused.
    private var scratch: [UInt8] = []

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
                // A checkpoint copies every page of the log into the file once (the newest version of a page): with
                // a longer log, the last pages of each table and index, rewritten by every commit, are copied fewer
                // times. At most 64 MiB of log (16,384 pages of 4 KiB) before a checkpoint (SQLite's default: 4 MiB).
                try db.execute(sql: "PRAGMA wal_autocheckpoint = 16384")
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
        defer {
            pendingTrace.removeAll(keepingCapacity: true)
            pendingOrder.removeAll(keepingCapacity: true)
        }
        do {
            try queue.write { db in
                // Looked up once per batch: the cache is keyed by the SQL text, hashed on each lookup.
                let statements = try Statements(db)
                for item in items {
                    switch item {
                    case .exchange(let exchange):
                        try insert(exchange, statements, db)
                        exchanges += 1
                    case .trace(let record, let time):
                        pend(record, time: time)
                    }
                }
                // A chunk per connection: a keep-alive connection's records of a whole batch in one row.
                for key in pendingOrder {
                    try writeChunk(of: key, statements, db)
                }
            }
        } catch {
            // The transaction rolled back: ids remembered during it may name rows that are not there.
            decisionIDs.removeAll()
            handshakeIDs.removeAll()
            connections.removeAll()
            lastReferences.removeAll()
            throw CaptureFileError.writing(path, error)
        }
        exchangesWritten += exchanges
    }

    /// Ends the run (its `ended` time), folds the write-ahead log into the file and closes it. After a failed
    /// write the log may stay beside the file: SQLite reads it back on the next open, so nothing committed is lost.
    /// So it does, without an error, while another connection still reads the file (a live view of it).
    public func close(ended: Double) throws(CaptureFileError) {
        do {
            try queue.write { db in
                try db.execute(sql: "UPDATE runs SET ended = ? WHERE id = ?", arguments: [ended, runID])
            }
            do {
                try queue.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                    try db.execute(sql: "PRAGMA journal_mode = DELETE")
                }
            } catch let error as DatabaseError
                where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED
            {
                // Another process reads the file (`atsproxy view`, `show`, sqlite3): leaving WAL mode needs the only
                // connection. The log stays beside the file, committed; SQLite reads it back on the next open.
            }
            try queue.close()
        } catch {
            throw CaptureFileError.writing(path, error)
        }
    }

    // MARK: - Rows

    /// The batch's prepared statements.
    private struct Statements {
        let exchange: Statement
        let body: Statement
        let chunk: Statement

        init(_ db: Database) throws {
            exchange = try db.cachedStatement(sql: """
                INSERT INTO exchanges (run_id, connection_id, started, request_sent, first_response_byte, ended,
                    method, url, host, status, http_version, outcome, action, errors, url_error, ssl_error,
                    request_bytes, response_bytes, duration_ms, interruption, note, decision_id, handshake_id,
                    upstream_tls_version, upstream_tls_suite, upstream_alpn, upstream_sni, upstream_resumed,
                    request_head, forwarded_request_head, response_head, client_response_head, upstream_address,
                    mirror, rebuilt_trace)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            body = try db.cachedStatement(
                sql: "INSERT INTO bodies (exchange_id, direction, bytes, size, truncated) VALUES (?, ?, ?, ?, ?)")
            chunk = try db.cachedStatement(sql: """
                INSERT INTO trace_chunks (run_id, connection_id, first_time, last_time, records)
                VALUES (?, ?, ?, ?, ?)
                """)
        }
    }

    private func insert(_ e: ExchangeSummary, _ statements: Statements, _ db: Database) throws {
        let connection = e.connection
        var references = References()
        if let connection {
            try upsertConnection(connection, db)
            references = try self.references(connection, db)
        }
        let detail = e.detail
        let timings = detail?.timings
        let ended = timings?.ended ?? Date().timeIntervalSince1970
        let started = timings?.started ?? ended - e.durationMilliseconds / 1000
        let upstream = connection?.upstreamTLS
        let first = e.errors.first
        var row = SQLiteInsert(statements.exchange, db)
        row.int(runID)
        row.int(connection.map { Int64(bitPattern: $0.connectionID) })
        row.double(started)
        row.double(timings?.requestSent)
        row.double(timings?.firstResponseByte)
        row.double(ended)
        row.text(e.method)
        row.text(e.url)
        scratch.removeAll(keepingCapacity: true)
        Self.appendHost(of: e.url, to: &scratch)
        row.text(bytes: scratch)
        row.int(e.status)
        row.text(e.httpVersion)
        row.text(e.outcome.rawValue)
        row.text(e.action?.rawValue)
        row.text(e.errors.isEmpty ? "" : e.errors.map(\.shortCode).joined(separator: ","))
        row.int(first?.urlError.code)
        row.int(first?.sslError?.code)
        row.int(e.requestBytes)
        row.int(e.responseBytes)
        row.double(e.durationMilliseconds)
        row.text(e.interruption)
        row.text(e.note)
        row.int(references.decisionRow)
        row.int(references.handshakeRow)
        row.text(upstream?.version)
        row.text(upstream?.cipherSuite)
        row.text(upstream?.alpn)
        row.text(upstream?.serverName)
        row.bool(upstream?.resumed)
        bindHead(detail?.request, HeadText.appendRequest, &row)
        bindHead(detail?.forwardedRequest, HeadText.appendRequest, &row)
        bindHead(detail?.response, HeadText.appendResponse, &row)
        bindHead(detail?.clientResponse, HeadText.appendResponse, &row)
        row.text(connection?.upstreamAddress)
        // Only `--ats mirror` exchanges have one, so Foundation's encoder stays off the common path.
        row.text(try e.mirror.map { String(decoding: try encoder.encode($0), as: UTF8.self) })
        let rebuilt = detail?.rebuiltTrace ?? []
        row.int(rebuilt.isEmpty ? nil : Int64(rebuilt.rawValue))
        try row.run()
        let exchangeID = db.lastInsertedRowID
        if let body = detail?.requestBody { try insertBody(body, direction: "request", exchangeID, statements, db) }
        if let body = detail?.responseBody { try insertBody(body, direction: "response", exchangeID, statements, db) }
    }

    private func bindHead<Head>(
        _ head: Head?, _ append: (Head, inout [UInt8]) -> Void, _ row: inout SQLiteInsert
    ) {
        guard let head else { return row.null() }
        scratch.removeAll(keepingCapacity: true)
        append(head, &scratch)
        row.text(bytes: scratch)
    }

    private func insertBody(
        _ body: CapturedBody, direction: String, _ exchangeID: Int64, _ statements: Statements, _ db: Database
    ) throws {
        // No row for an empty body: the run's body_limit says bodies were kept, and a missing row is zero bytes.
        guard body.totalBytes > 0 else { return }
        var row = SQLiteInsert(statements.body, db)
        row.int(exchangeID)
        row.text(direction)
        row.blob(body.bytes)
        row.int(body.totalBytes)
        row.bool(body.isTruncated)
        try row.run()
    }

    private func pend(_ record: DiagnosticsRecord, time: Double) {
        let key = record.connectionID
        if pendingTrace[key] == nil { pendingOrder.append(key) }
        pendingTrace[key, default: PendingChunk(first: time)].add(record, time: time)
    }

    /// Writes the connection's pending records as one chunk.
    private func writeChunk(of key: UInt64?, _ statements: Statements, _ db: Database) throws {
        guard var chunk = pendingTrace[key] else { return }
        TraceChunk.close(&chunk.bytes)
        var row = SQLiteInsert(statements.chunk, db)
        row.int(runID)
        row.int(key.map { Int64(bitPattern: $0) })
        row.double(chunk.first)
        row.double(chunk.last)
        row.text(bytes: chunk.bytes)
        try row.run()
    }

    /// The decision and handshake rows of `c`'s verdict, each written once.
    private func references(_ c: ConnectionRecord, _ db: Database) throws -> References {
        if let last = lastReferences[c.connectionID], last.decision == c.decision, last.violations == c.violations,
            last.facts == c.upstreamHandshake
        {
            return last
        }
        var references = References(decision: c.decision, violations: c.violations, facts: c.upstreamHandshake)
        references.decisionRow = try decisionID(c.decision, c.violations, db)
        references.handshakeRow = try c.upstreamHandshake.map { try handshakeID($0, db) }
        if lastReferences.count >= Self.cacheLimit { lastReferences.removeAll() }
        lastReferences[c.connectionID] = references
        return references
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
        var bytes: [UInt8] = []
        appendHost(of: url, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `host(of:)` appended to `out` as UTF-8 (ASCII letters lowercased), without making a String.
    static func appendHost(of url: String, to out: inout [UInt8]) {
        var url = url
        url.withUTF8 { u in
            var lo = 0
            var hi = u.count
            // After the scheme's "://".
            if u.count >= 3 {
                for i in 0..<(u.count - 2) where u[i] == UInt8(ascii: ":") && u[i + 1] == UInt8(ascii: "/")
                    && u[i + 2] == UInt8(ascii: "/")
                {
                    lo = i + 3
                    break
                }
            }
            // Up to the path, query or fragment.
            for i in lo..<hi where u[i] == UInt8(ascii: "/") || u[i] == UInt8(ascii: "?") || u[i] == UInt8(ascii: "#") {
                hi = i
                break
            }
            // After the user info.
            if let at = (lo..<hi).last(where: { u[$0] == UInt8(ascii: "@") }) { lo = at + 1 }
            if lo < hi, u[lo] == UInt8(ascii: "["), let close = (lo..<hi).first(where: { u[$0] == UInt8(ascii: "]") }) {
                lo += 1
                hi = close
            } else if let colon = (lo..<hi).last(where: { u[$0] == UInt8(ascii: ":") }) {
                hi = colon
            }
            for i in lo..<hi {
                let b = u[i]
                out.append(b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z") ? b | 0x20 : b)
            }
        }
    }
}

/// A connection's decision and handshake, and the rows they are stored in.
private struct References {
    var decision: PolicyDecision?
    var violations: [ATSViolation] = []
    var facts: HandshakeFacts?
    var decisionRow: Int64?
    var handshakeRow: Int64?
}

/// One connection's trace records not yet written: chunk bytes (`TraceChunk`) and the first and last record's time.
private struct PendingChunk {
    var bytes: [UInt8] = []
    var first: Double
    var last: Double

    init(first: Double) {
        self.first = first
        last = first
    }

    mutating func add(_ record: DiagnosticsRecord, time: Double) {
        TraceChunk.append(record, time: time, to: &bytes)
        last = time
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
