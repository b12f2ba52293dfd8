import ATSPolicy
import Foundation
import GRDB
import GRDBSQLite
import ProxyTrace

/// Writes exchange records and trace records into a capture file, one transaction per batch. Used from one thread
/// at a time (the capture sink's writer thread): SQLite's I/O never runs on an event loop.
///
/// The file is in WAL mode while a run writes (a batch's commit appends to the log; readers such as a live view
/// are not blocked), with `synchronous = NORMAL`: a committed batch survives the proxy being killed. `close()`
/// folds the log back into the file and leaves it in rollback-journal mode, one self-contained file that opens
/// read-only anywhere (a WAL file needs its `-shm` beside it, writable).
///
/// One writer per file: `open` takes an exclusive `flock` on the capture itself, held until `close()`, so a second
/// proxy on a file another is writing is refused at start (`CaptureFileError.Problem.inUse`); the kernel drops the
/// lock with its process, so a killed proxy leaves nothing stale behind. Other programs' short locks (a `sqlite3`
/// holding a write transaction, a reader's checkpoint) are waited out: SQLite waits `busyTimeout` for each, and a
/// batch still refused as busy is tried again, up to `busyAttempts` times, before the capture gives up.
public final class CaptureWriter: CaptureDestination, @unchecked Sendable {
    // @unchecked: one thread at a time uses a writer (documented); GRDB's queue serialises its own access.
    public let path: String
    public var location: String { path }
    public let runID: Int64
    private let queue: DatabaseQueue
    /// The descriptor holding the file's exclusive `flock` (-1 once closed).
    private var lockDescriptor: Int32
    /// `open` made the file (there was nothing at the path): `discard()` removes it.
    private let createdFile: Bool
    /// Whether this writer holds the file's exclusive lock: false on a file system without `flock`, where a second
    /// proxy on the same file is not refused.
    public private(set) var exclusive = true
    /// How long SQLite waits for another connection's lock before a statement fails with `SQLITE_BUSY`.
    static let busyTimeout: TimeInterval = 5
    /// Times a batch refused as busy is written (about `busyTimeout` each): a lock held for a minute ends the capture.
    static let busyAttempts = 12
    /// Told once per wait when a batch had to be tried again because another program held the file's lock.
    public var busyNotice: (@Sendable (String) -> Void)?
    /// Exchanges committed by this writer.
    public private(set) var exchangesWritten = 0
    /// Rows written once and referred to by id, remembered so each is stored once. Bounded: emptied when full,
    /// after which a value seen again is simply stored again.
    private var decisionIDs: [DecisionKey: Int64] = [:]
    private var handshakeIDs: [HandshakeFacts: Int64] = [:]
    /// Each connection's decision and handshake rows, from the last record of it a batch carried: its exchanges
    /// between two records refer to the same rows (`CaptureBatch`). Emptied when the encoder says `forget`.
    private var connectionRows: [UInt64: References] = [:]
    private static let cacheLimit = 4096
    /// Exchanges the writer inserts between two `sched_yield()`s (about 0.3 ms of work). A batch is tens of
    /// milliseconds of CPU; on a machine whose cores the proxy's loops share with the client and the origin, a loop
    /// thread or the client waiting behind the writer for its whole slice stalls every connection at once, and the
    /// cores sit idle meanwhile. Yielding lets whatever is runnable go first, and the writer goes on at once when
    /// nothing is: capture-soak, 200k exchanges, seven alternated pairs: 33,200–35,500 req/s against 30,700–33,200
    /// without, and 29.0 against 30.3 µs of proxy CPU per exchange on average (proxybench's short rounds showed no
    /// difference).
    static let yieldEvery = 64
    /// The page size of a capture this build creates.
    static let pageSize = 16384
    private let encoder = JSONEncoder()
    /// Encodes the items given to `write(_:)` (a proxy's sink encodes its own batches).
    private var itemEncoder = CaptureEncoder()
    private var itemBatch = CaptureBatch()
    /// The batch's trace records, per connection (nil: records of no connection), as chunk bytes; written at the end
    /// of the batch, a row per connection.
    private var pendingTrace: [UInt64?: PendingChunk] = [:]
    private var pendingOrder: [UInt64?] = []

    /// Opens `path` for a run: creates a new capture (mode 0600: bodies may hold secrets), fills an empty file, or
    /// appends a run to an existing capture after checking it (a capture this build can read, intact). Anything
    /// else is refused before a byte is written, and so is a file another writer holds (`inUse`). A file this call
    /// created is removed again when it fails (a full disk, an I/O error): no half-made capture is left behind.
    public static func open(path: String, run: CaptureRunInfo) throws(CaptureFileError) -> CaptureWriter {
        var found = try CaptureFile.find(path)
        var lock: Int32 = -1
        var created = false
        if found == .nothing {
            lock = Foundation.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if lock >= 0 {
                created = true
            } else if errno == EEXIST {
                found = .emptyFile  // another process made it meanwhile: its lock decides below
            } else {
                throw CaptureFileError(path: path, problem: .cannotOpen(Self.createFailure(path)))
            }
        }
        if lock < 0 {
            lock = Foundation.open(path, O_RDONLY | O_CLOEXEC)
            guard lock >= 0 else {
                throw CaptureFileError(path: path, problem: .cannotOpen(String(cString: strerror(errno))))
            }
        }
        var exclusive = true
        if flock(lock, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            // A file system without flock (some network and FUSE ones) still takes SQLite's own locks: the capture
            // goes on without the one-writer check, and says so (`exclusive`).
            if code == ENOLCK || code == EOPNOTSUPP || code == ENOSYS || code == EINVAL {
                exclusive = false
            } else {
                Foundation.close(lock)
                throw CaptureFileError(
                    path: path, problem: code == EWOULDBLOCK ? .inUse : .cannotOpen(String(cString: strerror(code))))
            }
        }
        do {
            let writer = try open(path: path, run: run, found: created ? .nothing : found, lock: lock, created: created)
            writer.exclusive = exclusive
            return writer
        } catch {
            if created { Self.removeFiles(at: path) }
            Foundation.close(lock)
            throw error
        }
    }

    /// Removes a capture file with SQLite's files beside it (a capture this process created and could not finish, or
    /// a temporary one), whichever of them exist.
    public static func removeFiles(at path: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
    }

    private static func open(path: String, run: CaptureRunInfo, found: CaptureFile.Found, lock: Int32, created: Bool)
        throws(CaptureFileError) -> CaptureWriter
    {
        switch found {
        case .nothing, .emptyFile:
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
        SQLiteSetup.ensure()
        var configuration = Configuration()
        configuration.label = "atsproxy.capture.writer"
        configuration.busyMode = .timeout(Self.busyTimeout)
        let queue: DatabaseQueue
        do { queue = try DatabaseQueue(path: path, configuration: configuration) } catch {
            throw CaptureFileError.reading(path, error)
        }
        do {
            try queue.writeWithoutTransaction { db in
                // 16 KiB pages for a new file (an existing one keeps its own): a captured exchange is a row of about
                // 600 bytes and a 1 KiB body, which left a quarter of each 4 KiB page empty, and every page costs its
                // B-tree work, its log frame (two writes) and its copy at the checkpoint. Measured with SQLite alone
                // (the capture's rows, 150,000 of them): 6.5 µs of CPU per exchange with 4 KiB pages, 4.7 with 16.
                // Must come before the first table, and before WAL mode.
                try db.execute(sql: "PRAGMA page_size = \(Self.pageSize)")
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
                // A checkpoint copies every page of the log into the file once (the newest version of a page): with
                // a longer log, the last pages of each table and index, rewritten by every commit, are copied fewer
                // times. At most 64 MiB of log before a checkpoint (SQLite's default: 1,000 pages).
                let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
                try db.execute(sql: "PRAGMA wal_autocheckpoint = \((64 << 20) / max(512, pageSize))")
                // The pages a batch touches besides the tables' ends (the host index's pages of each host) stay
                // cached between batches instead of being read back from the file: 16 MiB, fixed, where SQLite's
                // default is 2 MiB.
                try db.execute(sql: "PRAGMA cache_size = -16384")
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
            return CaptureWriter(path: path, queue: queue, runID: runID, lock: lock, created: created)
        } catch {
            throw CaptureFileError.writing(path, error)
        }
    }

    private init(path: String, queue: DatabaseQueue, runID: Int64, lock: Int32, created: Bool) {
        self.path = path
        self.queue = queue
        self.runID = runID
        lockDescriptor = lock
        createdFile = created
        encoder.outputFormatting = [.sortedKeys]
    }

    deinit {
        // A writer dropped without `close()` (a failed start): the lock goes with it.
        if lockDescriptor >= 0 { Foundation.close(lockDescriptor) }
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
        defer { itemBatch.removeAll() }
        for item in items { itemEncoder.append(item, to: &itemBatch) }
        do { try write(itemBatch) } catch {
            // The writer forgot the connections of the rolled-back batch: the encoder must send them again.
            itemEncoder = CaptureEncoder()
            throw error
        }
    }

    /// Writes a batch encoded by a `CaptureEncoder` in one transaction: all of it is in the file afterwards, or (on
    /// an error) none of it, and every earlier batch stays. Batches must come in the order their encoder made them.
    /// Another program's lock is waited out (`busyTimeout`, then the batch again, up to `busyAttempts` times).
    public func write(_ batch: borrowing CaptureBatch) throws(CaptureFileError) {
        guard !batch.isEmpty else { return }
        var attempt = 1
        while true {
            // Whether the transaction began: a busy file refuses its BEGIN IMMEDIATE (the write lock), before the
            // batch changed anything the writer remembers, so the batch can simply be written again.
            var began = false
            do {
                try writeOnce(batch, began: &began)
                return
            } catch let error as DatabaseError
                where (error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED) && !began
                && attempt < Self.busyAttempts
            {
                if attempt == 1 {
                    busyNotice?(
                        "\(path): another program holds the capture's lock (\(error.sqliteText)); waiting for it, "
                            + "nothing is dropped (the proxy slows to the capture's pace meanwhile)")
                }
                attempt += 1
                // SQLite waited `busyTimeout` already, except for what it refuses at once.
                usleep(20_000)
            } catch {
                // The transaction rolled back: ids remembered during it may name rows that are not there.
                decisionIDs.removeAll()
                handshakeIDs.removeAll()
                connectionRows.removeAll()
                if let error = error as? DatabaseError, !began,
                    error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED
                {
                    let waited = Int(Self.busyTimeout) * Self.busyAttempts
                    throw CaptureFileError(
                        path: path,
                        problem: .cannotWrite(
                            "\(error.sqliteText): another program held the capture's lock for more than \(waited) s"))
                }
                throw CaptureFileError.writing(path, error)
            }
        }
    }

    private func writeOnce(_ batch: borrowing CaptureBatch, began: inout Bool) throws {
        var exchanges = 0
        defer {
            pendingTrace.removeAll(keepingCapacity: true)
            pendingOrder.removeAll(keepingCapacity: true)
        }
        try queue.write { db in
            began = true
            // Looked up once per batch: the cache is keyed by the SQL text, hashed on each lookup.
            let statements = try Statements(db)
            defer { statements.clearBindings() }
            try batch.withBytes { bytes in
                var frames = CaptureBatchReader(bytes)
                while !frames.atEnd {
                    switch frames.kind() {
                    case .exchange:
                        try insertExchange(&frames, batch.connections, statements, db)
                        exchanges += 1
                        if exchanges % Self.yieldEvery == 0 { sched_yield() }
                    case .trace:
                        pendTrace(&frames)
                    case .forget:
                        connectionRows.removeAll()
                    case nil:
                        preconditionFailure("a capture batch frame of no known kind")
                    }
                }
            }
            // A chunk per connection: a keep-alive connection's records of a whole batch in one row.
            for key in pendingOrder {
                try writeChunk(of: key, statements, db)
            }
        }
        exchangesWritten += exchanges
    }

    /// Ends the run (its `ended` time), folds the write-ahead log into the file and closes it. After a failed
    /// write the log may stay beside the file: SQLite reads it back on the next open, so nothing committed is lost.
    /// So it does, without an error, while another connection still reads the file (a live view of it).
    public func close(ended: Double) throws(CaptureFileError) {
        defer {
            if lockDescriptor >= 0 { Foundation.close(lockDescriptor) }
            lockDescriptor = -1
        }
        do {
            try queue.write { db in
                try db.execute(sql: "UPDATE runs SET ended = ? WHERE id = ?", arguments: [ended, runID])
            }
            do {
                try queue.writeWithoutTransaction { db in
                    // Not waited for: another connection open on the file (a live view) keeps it in WAL mode anyway.
                    sqlite3_busy_timeout(db.sqliteConnection, 0)
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

    /// Undoes `open` for a run that never started (the proxy could not listen, say): a file `open` made is removed
    /// with SQLite's files beside it; in a capture that was there before, the run's rows are deleted and the file
    /// closed as `close` does. Either way nothing of the run is left. Instead of `close`, not after it.
    public func discard() throws(CaptureFileError) {
        defer {
            if lockDescriptor >= 0 { Foundation.close(lockDescriptor) }
            lockDescriptor = -1
        }
        guard createdFile else {
            do {
                try queue.write { db in
                    // Children first: the schema's foreign keys are enforced.
                    let ofRun = "SELECT id FROM exchanges WHERE run_id = ?"
                    for (table, condition) in [
                        ("exchange_bodies", "id / 2 IN (\(ofRun))"), ("trace_chunks", "run_id = ?"),
                        ("exchanges", "run_id = ?"), ("connections", "run_id = ?"), ("runs", "id = ?"),
                    ] {
                        try db.execute(sql: "DELETE FROM \(table) WHERE \(condition)", arguments: [runID])
                    }
                }
            } catch {
                throw CaptureFileError.writing(path, error)
            }
            try close(ended: 0)
            return
        }
        do { try queue.close() } catch { throw CaptureFileError.writing(path, error) }
        Self.removeFiles(at: path)
    }

    // MARK: - Rows

    /// The batch's prepared statements.
    private struct Statements {
        let exchange: Statement
        let body: Statement
        let chunk: Statement

        init(_ db: Database) throws {
            exchange = try db.cachedStatement(sql: Self.exchangeInsert)
            body = try db.cachedStatement(
                sql: "INSERT INTO exchange_bodies (id, bytes, size, truncated) VALUES (?, ?, ?, ?)")
            chunk = try db.cachedStatement(sql: """
                INSERT INTO trace_chunks (run_id, connection_id, first_time, last_time, records)
                VALUES (?, ?, ?, ?, ?)
                """)
        }

        /// After run_id, decision_id and handshake_id, the columns in the order of an exchange frame's values.
        static let exchangeInsert: String = {
            let columns = ["run_id", "decision_id", "handshake_id"] + ExchangeField.names
            return "INSERT INTO exchanges (\(columns.joined(separator: ", "))) VALUES ("
                + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
        }()

        /// Values bound from a batch's bytes point into them: none may outlive the batch.
        func clearBindings() {
            for statement in [exchange, body, chunk] { sqlite3_clear_bindings(statement.sqliteStatement) }
        }
    }

    private func insertExchange(
        _ frames: inout CaptureBatchReader, _ connections: [ConnectionRecord], _ statements: Statements, _ db: Database
    ) throws {
        let slot = Int32(bitPattern: frames.raw32())
        var row = SQLiteInsert(statements.exchange, db)
        row.int(runID)
        // The connection's rows: from its record when the frame carries one, else those of its last.
        let connectionValue = frames.value()
        var references: References?
        if slot >= 0 {
            let connection = connections[Int(slot)]
            try upsertConnection(connection, db)
            references = try self.references(connection, db)
        } else if case .integer(let id) = connectionValue {
            references = connectionRows[UInt64(bitPattern: id)]
        }
        row.int(references?.decisionRow)
        row.int(references?.handshakeRow)
        row.bind(connectionValue)
        for _ in 1..<CaptureBatch.exchangeColumns { row.bind(frames.value()) }
        try row.run()
        let exchangeID = db.lastInsertedRowID
        for _ in 0..<frames.byte() {
            let direction = CaptureBatch.Direction(rawValue: frames.byte()) ?? .response
            let size = Int64(bitPattern: frames.raw())
            let kept = frames.bytes(Int(frames.raw32()))
            var body = SQLiteInsert(statements.body, db)
            body.int(exchangeID * 2 + Int64(direction.rawValue))
            body.blob(kept)
            body.int(size)
            body.bool(Int64(kept.count) < size)
            try body.run()
        }
    }

    private func pendTrace(_ frames: inout CaptureBatchReader) {
        var key: UInt64?
        if case .integer(let id) = frames.value() { key = UInt64(bitPattern: id) }
        let time = Double(bitPattern: frames.raw())
        guard case .text(let element) = frames.value() else { return }
        if pendingTrace[key] == nil { pendingOrder.append(key) }
        pendingTrace[key, default: PendingChunk(first: time)].add(element: element, time: time)
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

    /// The decision and handshake rows of `c`'s verdict, each written once, remembered as its connection's.
    private func references(_ c: ConnectionRecord, _ db: Database) throws -> References {
        var references = References()
        references.decisionRow = try decisionID(c.decision, c.violations, db)
        references.handshakeRow = try c.upstreamHandshake.map { try handshakeID($0, db) }
        // Bounded by the encoder, whose `forget` frame empties it: the two must hold the same connections.
        connectionRows[c.connectionID] = references
        return references
    }

    private func upsertConnection(_ c: ConnectionRecord, _ db: Database) throws {
        let tls = c.clientTLS
        let statement = try db.cachedStatement(sql: Self.connectionUpsert { _ in "?" })
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

    /// A connection's row, inserted or completed (a later record of the connection may know what an earlier did
    /// not), with `placeholder(n)` for the nth value: `?` for SQLite, `$n` for PostgreSQL (the team store's writer).
    static func connectionUpsert(_ placeholder: (Int) -> String) -> String {
        """
        INSERT INTO connections (run_id, connection_id, client_address, client_tls_version, client_tls_suite,
            client_alpn, client_sni, client_resumed, first_seen)
        VALUES (\((1...9).map(placeholder).joined(separator: ", ")))
        ON CONFLICT (run_id, connection_id) DO UPDATE SET
            client_address = coalesce(excluded.client_address, connections.client_address),
            client_tls_version = coalesce(excluded.client_tls_version, connections.client_tls_version),
            client_tls_suite = coalesce(excluded.client_tls_suite, connections.client_tls_suite),
            client_alpn = coalesce(excluded.client_alpn, connections.client_alpn),
            client_sni = coalesce(excluded.client_sni, connections.client_sni),
            client_resumed = coalesce(excluded.client_resumed, connections.client_resumed)
        """
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

/// The decision and handshake rows a connection's exchanges refer to.
struct References {
    var decisionRow: Int64?
    var handshakeRow: Int64?
}

/// One connection's trace records not yet written: chunk bytes (`TraceChunk`) and the first and last record's time.
struct PendingChunk {
    var bytes: [UInt8] = []
    var first: Double
    var last: Double

    init(first: Double) {
        self.first = first
        last = first
    }

    mutating func add(element: UnsafeRawBufferPointer, time: Double) {
        TraceChunk.append(element: element, to: &bytes)
        last = time
    }
}

struct DecisionKey: Hashable {
    var decision: PolicyDecision
    var violations: [ATSViolation]
}
