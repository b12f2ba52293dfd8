import ATSPolicy
import Foundation
import ProxyTrace

/// Writes a proxy's capture into the team store (`--capture postgresql://…`): the same batches as a capture file
/// gets (`CaptureBatch`), one transaction each, on the capture sink's writer thread.
///
/// Theory of operation. A batch becomes one transaction: its exchanges take ids from the store's sequence (one
/// query for the batch), new connection, decision and handshake rows are inserted (the last two once per writer,
/// remembered by id), then the exchanges, their bodies and the batch's trace chunks each go in one `COPY`. Ids come
/// from sequences and each run's rows carry its run id, so proxies writing at once never touch each other's rows.
/// A committed batch survives the proxy being killed; a batch cut off by a crash leaves nothing.
///
/// Outages. When the database cannot be reached (refused, stopped, the network gone), the writer says so once and
/// keeps each batch in memory, up to `maxHeldBytes` of encoded exchanges; past that, new batches are dropped and
/// counted. It tries to reconnect at most once a second (`retryInterval`; the sink calls it while it holds
/// batches), and when the database answers again it writes what it holds, in order, and says how many exchanges it
/// caught up and dropped. Nothing here blocks an event loop: a slow database slows only this thread, and the sink
/// drops what overflows its queue meanwhile (`dropsWhenBehind`).
public final class PostgresCaptureWriter: CaptureDestination, @unchecked Sendable {
    // @unchecked: one thread at a time uses a writer (the sink's writer thread), as with `CaptureWriter`.
    public let target: PostgresLocation
    public var location: String { target.redacted }
    public let runID: Int64
    public private(set) var exchangesWritten = 0
    /// Exchanges dropped because the database was unreachable for longer than `maxHeldBytes` lasted.
    public private(set) var exchangesDropped = 0
    public var busyNotice: (@Sendable (String) -> Void)?
    public var dropsWhenBehind: Bool { true }
    public var wantsRetry: Bool { !held.isEmpty }

    /// Encoded batches kept while the database is unreachable: 256 MiB, about 300,000 exchanges without bodies.
    public static let maxHeldBytes = 256 << 20
    /// Seconds between two attempts to reconnect.
    static let retryInterval = 1.0
    /// A statement running longer than this fails the batch, which is then held as in an outage.
    static let statementTimeout = "15s"

    private var connection: PostgresConnection?
    private var held: [HeldBatch] = []
    private var heldBytes = 0
    private var heldExchanges = 0
    private var nextAttempt = 0.0
    /// When the current outage began (nil while connected), for the notice that ends it.
    private var outageStarted: Double?
    private var droppedInOutage = 0

    private var decisionIDs: [DecisionKey: Int64] = [:]
    private var handshakeIDs: [HandshakeFacts: Int64] = [:]
    private var connectionRows: [UInt64: References] = [:]
    /// The last record of each connection a batch carried, whether or not the batch was written: an exchange of a
    /// later batch refers to its connection by id alone, and when that connection's record was dropped, its row is
    /// written from here.
    private var knownConnections: [UInt64: ConnectionRecord] = [:]
    private static let cacheLimit = 4096
    private let encoder = JSONEncoder()

    private var exchangeRows = PostgresCopyText()
    private var bodyRows = PostgresCopyText()
    private var chunkRows = PostgresCopyText()
    private var pendingTrace: [UInt64?: PendingChunk] = [:]
    private var pendingOrder: [UInt64?] = []
    private var itemEncoder = CaptureEncoder()
    private var itemBatch = CaptureBatch()

    /// Connects, brings the schema up to date (`PostgresSchema`) and records the run. The database must be
    /// reachable at start: a wrong URI or password is said at once, not buffered.
    public static func open(_ target: PostgresLocation, run: CaptureRunInfo) throws(CaptureFileError)
        -> PostgresCaptureWriter
    {
        do throws(PostgresError) {
            let connection = try connect(target)
            try PostgresSchema.migrate(connection, version: run.atsproxyVersion)
            let settings = run.settings
            let id = try connection.execute(
                """
                INSERT INTO runs (started, atsproxy_version, body_limit, settings, label, host_name, listen_address,
                    policy, ios_profile)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id
                """,
                [
                    PostgresValue(run.started), .text(run.atsproxyVersion), PostgresValue(Int64(run.bodyLimit)),
                    .text(JSONText.pairs(settings.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })),
                    PostgresValue(settings["label"]), .text(settings["host"] ?? ProcessInfo.processInfo.hostName),
                    .text(settings["listen"] ?? ""), .text(settings["policy"] ?? ""), .text(settings["ios"] ?? ""),
                ]
            ).scalar.flatMap { Int64($0) }
            guard let id else {
                throw PostgresError(message: "the store gave no run id", sqlState: nil, connectionLost: false)
            }
            return PostgresCaptureWriter(target: target, runID: id, connection: connection)
        } catch {
            throw CaptureFileError(path: target.redacted, problem: .cannotOpen(error.message))
        }
    }

    private init(target: PostgresLocation, runID: Int64, connection: PostgresConnection) {
        self.target = target
        self.runID = runID
        self.connection = connection
        encoder.outputFormatting = [.sortedKeys]
    }

    /// A connection with the writer's session settings.
    static func connect(_ target: PostgresLocation) throws(PostgresError) -> PostgresConnection {
        let connection = try PostgresConnection(target, applicationName: "atsproxy capture")
        try connection.execute("SET statement_timeout = '\(statementTimeout)'")
        return connection
    }

    /// Writes `items` as one batch (tests, `capture copy`).
    public func write(_ items: some Collection<CaptureItem>) throws(CaptureFileError) {
        defer { itemBatch.removeAll() }
        for item in items { itemEncoder.append(item, to: &itemBatch) }
        try write(itemBatch)
    }

    public func write(_ batch: borrowing CaptureBatch) throws(CaptureFileError) {
        for record in batch.connections {
            if knownConnections.count >= Self.cacheLimit { knownConnections.removeAll() }
            knownConnections[record.connectionID] = record
        }
        if connection != nil && held.isEmpty {
            guard !batch.isEmpty else { return }
            do throws(PostgresError) {
                try writeOnce(batch)
                return
            } catch where error.connectionLost || Self.isTransient(error) {
                wentDown(error)
            } catch {
                throw CaptureFileError(path: location, problem: .cannotWrite(error.message))
            }
        }
        if !batch.isEmpty { hold(batch) }
        try catchUp()
    }

    /// Server-side conditions that pass: out of disk or connections, a shutdown, a statement timeout, a deadlock.
    private static func isTransient(_ error: PostgresError) -> Bool {
        guard let state = error.sqlState else { return false }
        return state.hasPrefix("53") || state.hasPrefix("57") || state == "40P01" || state == "40001"
            || state == foreignKeyViolation
    }

    private func wentDown(_ error: PostgresError) {
        connection?.close()
        connection = nil
        nextAttempt = Date().timeIntervalSince1970 + Self.retryInterval
        if outageStarted == nil {
            outageStarted = Date().timeIntervalSince1970
            droppedInOutage = 0
            busyNotice?(
                "capture \(location): the database is unreachable (\(error.message)); the proxy goes on, holding up "
                    + "to \(Self.maxHeldBytes >> 20) MiB of exchanges and reconnecting every second")
        }
    }

    private func hold(_ batch: borrowing CaptureBatch) {
        guard heldBytes + batch.byteCount <= Self.maxHeldBytes || held.isEmpty else {
            if droppedInOutage == 0 {
                busyNotice?(
                    "capture \(location): \(Self.maxHeldBytes >> 20) MiB of exchanges held while the database is "
                        + "unreachable; dropping newer ones (counted) until it is back")
            }
            exchangesDropped += batch.exchangeCount
            droppedInOutage += batch.exchangeCount
            return
        }
        held.append(HeldBatch(batch.copied()))
        heldBytes += batch.byteCount
        heldExchanges += batch.exchangeCount
    }

    /// Reconnects when due, then writes the held batches in order.
    private func catchUp(now: Double = Date().timeIntervalSince1970, force: Bool = false) throws(CaptureFileError) {
        if connection == nil {
            guard force || now >= nextAttempt else { return }
            do { connection = try Self.connect(target) } catch {
                nextAttempt = now + Self.retryInterval
                return
            }
        }
        let caughtUp = heldExchanges
        while !held.isEmpty {
            do throws(PostgresError) {
                try writeOnce(held[0].batch)
            } catch where error.connectionLost || Self.isTransient(error) {
                wentDown(error)
                return
            } catch {
                throw CaptureFileError(path: location, problem: .cannotWrite(error.message))
            }
            let done = held.removeFirst()
            heldBytes -= done.batch.byteCount
            heldExchanges -= done.batch.exchangeCount
        }
        if let started = outageStarted {
            outageStarted = nil
            let seconds = String(format: "%.1f", now - started)
            busyNotice?(
                "capture \(location): the database is back after \(seconds) s; \(caughtUp) held exchanges written"
                    + (droppedInOutage > 0 ? ", \(droppedInOutage) dropped" : ", none dropped"))
        }
    }

    public func close(ended: Double) throws(CaptureFileError) {
        try finish(ended: ended)
    }

    /// Removes the run this writer opened (the proxy could not start), with anything written for it, and
    /// disconnects.
    public func discard() throws(CaptureFileError) {
        defer {
            connection?.close()
            connection = nil
        }
        guard let connection else {
            throw CaptureFileError(
                path: location, problem: .cannotWrite("the database is unreachable: run \(runID) stays in the store"))
        }
        do throws(PostgresError) {
            _ = try PostgresPrune.removeRun(runID, connection)
        } catch {
            throw CaptureFileError(path: location, problem: .cannotWrite(error.message))
        }
    }

    /// Writes what is held, records the run's end (nil: leaves it open, as a copied run that never ended) and
    /// disconnects.
    public func finish(ended: Double?) throws(CaptureFileError) {
        defer {
            connection?.close()
            connection = nil
        }
        try catchUp(force: true)
        let unwritten = heldExchanges
        guard let connection, held.isEmpty else {
            throw CaptureFileError(
                path: location,
                problem: .cannotWrite(
                    "the database is unreachable at exit: \(unwritten) held exchanges are not written"
                        + (exchangesDropped > 0 ? " and \(exchangesDropped) were dropped" : "")))
        }
        do throws(PostgresError) {
            if let ended {
                try connection.execute(
                    "UPDATE runs SET ended = $1 WHERE id = $2", [PostgresValue(ended), PostgresValue(runID)])
            }
        } catch {
            throw CaptureFileError(path: location, problem: .cannotWrite(error.message))
        }
        if exchangesDropped > 0 {
            throw CaptureFileError(
                path: location,
                problem: .cannotWrite("\(exchangesDropped) exchanges were dropped while the database was unreachable"))
        }
    }

    // MARK: - One batch

    private func writeOnce(_ batch: borrowing CaptureBatch) throws(PostgresError) {
        guard let connection else {
            throw PostgresError(message: "not connected", sqlState: nil, connectionLost: true)
        }
        let remembered = (decisionIDs, handshakeIDs, connectionRows)
        exchangeRows.removeAll()
        bodyRows.removeAll()
        chunkRows.removeAll()
        pendingTrace.removeAll(keepingCapacity: true)
        pendingOrder.removeAll(keepingCapacity: true)
        do throws(PostgresError) {
            try connection.execute("BEGIN")
            var ids: [Int64] = []
            if batch.exchangeCount > 0 {
                ids = try connection.execute(
                    "SELECT nextval('exchange_ids') FROM generate_series(1, \(batch.exchangeCount))"
                ).rows.compactMap { $0[0].flatMap { Int64($0) } }.sorted()
            }
            var next = 0
            let connections = batch.connections
            let failure: PostgresError? = batch.withBytes { bytes in
                var frames = CaptureBatchReader(bytes)
                while !frames.atEnd {
                    switch frames.kind() {
                    case .exchange:
                        guard next < ids.count else {
                            return PostgresError(
                                message: "the store gave too few exchange ids", sqlState: nil, connectionLost: false)
                        }
                        do throws(PostgresError) {
                            try addExchange(&frames, id: ids[next], connections, connection)
                        } catch {
                            return error
                        }
                        next += 1
                    case .trace:
                        pendTrace(&frames)
                    case .forget:
                        connectionRows.removeAll()
                    case nil:
                        preconditionFailure("a capture batch frame of no known kind")
                    }
                }
                return nil
            }
            if let failure { throw failure }
            for key in pendingOrder {
                guard var chunk = pendingTrace[key] else { continue }
                TraceChunk.close(&chunk.bytes)
                chunkRows.int(runID)
                chunkRows.int(key.map { Int64(bitPattern: $0) })
                chunkRows.real(chunk.first)
                chunkRows.real(chunk.last)
                chunk.bytes.withUnsafeBytes { chunkRows.text(utf8: $0) }
                chunkRows.endRow()
            }
            if !exchangeRows.isEmpty {
                try connection.copy(
                    "COPY exchanges (id, run_id, "
                        + PostgresSchema.exchangeColumns.map(\.0).joined(separator: ", ") + ") FROM STDIN",
                    data: exchangeRows.bytes)
            }
            if !bodyRows.isEmpty {
                try connection.copy("COPY exchange_bodies (id, bytes, size, truncated) FROM STDIN", data: bodyRows.bytes)
            }
            if !chunkRows.isEmpty {
                try connection.copy(
                    "COPY trace_chunks (run_id, connection_id, first_time, last_time, records) FROM STDIN",
                    data: chunkRows.bytes)
            }
            try connection.execute("COMMIT")
            exchangesWritten += ids.count
        } catch {
            // Rolled back: ids remembered during the batch may name rows that are not there.
            (decisionIDs, handshakeIDs, connectionRows) = remembered
            if error.sqlState == Self.foreignKeyViolation {
                // A row remembered from before is gone (`capture prune` removed an idle run's rows): forgotten, so
                // the batch, tried again, writes them anew.
                decisionIDs.removeAll()
                handshakeIDs.removeAll()
                connectionRows.removeAll()
            }
            connection.rollback()
            throw error
        }
    }

    static let foreignKeyViolation = "23503"

    private func addExchange(
        _ frames: inout CaptureBatchReader, id: Int64, _ connections: [ConnectionRecord],
        _ connection: PostgresConnection
    ) throws(PostgresError) {
        let slot = Int32(bitPattern: frames.raw32())
        let connectionValue = frames.value()
        var references: References?
        var record: ConnectionRecord?
        if slot >= 0 {
            record = connections[Int(slot)]
        } else if case .integer(let cid) = connectionValue {
            references = connectionRows[UInt64(bitPattern: cid)]
            // The batch that carried the connection's record was dropped in an outage: written from memory.
            if references == nil { record = knownConnections[UInt64(bitPattern: cid)] }
        }
        if let record {
            try upsertConnection(record, connection)
            references = try self.references(record, connection)
        }
        exchangeRows.int(id)
        exchangeRows.int(runID)
        exchangeRows.int(references?.decisionRow)
        exchangeRows.int(references?.handshakeRow)
        // The frame carries the fields in ExchangeField's order, the connection's id first (read above).
        assert(ExchangeField.allCases.first == .connectionID, "the connection's id leads an exchange's frame")
        exchangeRows.value(connectionValue)
        for _ in 1..<CaptureBatch.exchangeColumns { exchangeRows.value(frames.value()) }
        exchangeRows.endRow()
        for _ in 0..<frames.byte() {
            let direction = CaptureBatch.Direction(rawValue: frames.byte()) ?? .response
            let size = Int64(bitPattern: frames.raw())
            let kept = frames.bytes(Int(frames.raw32()))
            bodyRows.int(id * 2 + Int64(direction.rawValue))
            bodyRows.bytea(kept)
            bodyRows.int(size)
            bodyRows.int(Int64(kept.count) < size ? 1 : 0)
            bodyRows.endRow()
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

    private func references(_ c: ConnectionRecord, _ connection: PostgresConnection) throws(PostgresError) -> References {
        var references = References()
        references.decisionRow = try decisionID(c.decision, c.violations, connection)
        if let facts = c.upstreamHandshake { references.handshakeRow = try handshakeID(facts, connection) }
        if connectionRows.count >= Self.cacheLimit { connectionRows.removeAll() }
        connectionRows[c.connectionID] = references
        return references
    }

    private func upsertConnection(_ c: ConnectionRecord, _ connection: PostgresConnection) throws(PostgresError) {
        let tls = c.clientTLS
        try connection.execute(
            CaptureWriter.connectionUpsert { "$\($0)" },
            [
                PostgresValue(runID), PostgresValue(Int64(bitPattern: c.connectionID)), PostgresValue(c.clientAddress),
                PostgresValue(tls?.version), PostgresValue(tls?.cipherSuite), PostgresValue(tls?.alpn),
                PostgresValue(tls?.serverName), PostgresValue(tls.map { Int64($0.resumed ? 1 : 0) }),
                PostgresValue(Date().timeIntervalSince1970),
            ])
    }

    private func decisionID(_ decision: PolicyDecision?, _ violations: [ATSViolation], _ connection: PostgresConnection)
        throws(PostgresError) -> Int64?
    {
        guard let decision else { return nil }
        let key = DecisionKey(decision: decision, violations: violations)
        if let id = decisionIDs[key] { return id }
        let id = try insertReturningID(
            "INSERT INTO decisions (decided_by, key_path, reason, notes, violations) VALUES ($1, $2, $3, $4, $5) RETURNING id",
            [
                .text(decision.keyPathString), .text(JSONText.strings(decision.keyPath)), .text(decision.reason),
                .text(JSONText.strings(decision.notes)), .text(json(violations)),
            ], connection)
        if decisionIDs.count >= Self.cacheLimit { decisionIDs.removeAll() }
        decisionIDs[key] = id
        return id
    }

    private func handshakeID(_ facts: HandshakeFacts, _ connection: PostgresConnection) throws(PostgresError) -> Int64 {
        if let id = handshakeIDs[facts] { return id }
        let id = try insertReturningID(
            "INSERT INTO handshakes (version, cipher_suite, failure, facts) VALUES ($1, $2, $3, $4) RETURNING id",
            [
                PostgresValue(facts.version?.plistName), PostgresValue(facts.cipherSuiteName),
                PostgresValue(facts.failure.map { String(describing: $0) }), .text(json(facts)),
            ], connection)
        if handshakeIDs.count >= Self.cacheLimit { handshakeIDs.removeAll() }
        handshakeIDs[facts] = id
        return id
    }

    private func insertReturningID(_ sql: String, _ values: [PostgresValue], _ connection: PostgresConnection)
        throws(PostgresError) -> Int64
    {
        guard let id = try connection.execute(sql, values).scalar.flatMap({ Int64($0) }) else {
            throw PostgresError(message: "the store gave no id", sqlState: nil, connectionLost: false)
        }
        return id
    }

    /// Violations and handshake facts as the capture file stores them. Their encoding cannot fail (strings,
    /// numbers, arrays); were it to, the row keeps an empty JSON array rather than lose the exchange.
    private func json(_ value: some Encodable) -> String {
        do { return String(decoding: try encoder.encode(value), as: UTF8.self) } catch { return "[]" }
    }
}

/// A batch kept through an outage (an array cannot hold a non-copyable batch itself).
private final class HeldBatch {
    let batch: CaptureBatch

    init(_ batch: consuming CaptureBatch) { self.batch = batch }
}
