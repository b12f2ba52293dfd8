import Foundation
import GRDB

/// Which part of the team store a reader wants: runs (by id or label), a time range of the exchanges' start, and
/// a filter of the filter language (compiled to PostgreSQL's dialect, so the store sends only what matches).
public struct TeamStoreSelection: Sendable, Equatable {
    public var filter: CaptureFilter
    /// Runs with these ids (nil: any).
    public var runIDs: [Int64]?
    /// Runs with one of these labels (nil: any).
    public var labels: [String]?
    /// Exchanges that started at or after `since`, before `until` (Unix seconds; nil: unbounded).
    public var since: Double?
    public var until: Double?
    /// Only these exchanges (`show ID`; the live view's new rows).
    public var exchangeIDs: [Int64]?
    /// Only the newest this many of the matching exchanges (`show --limit`).
    public var newest: Int?

    public init(
        filter: CaptureFilter = CaptureFilter(), runIDs: [Int64]? = nil, labels: [String]? = nil, since: Double? = nil,
        until: Double? = nil, exchangeIDs: [Int64]? = nil, newest: Int? = nil
    ) {
        self.filter = filter
        self.runIDs = runIDs
        self.labels = labels
        self.since = since
        self.until = until
        self.exchangeIDs = exchangeIDs
        self.newest = newest
    }

    /// The runs' condition over `r` and the exchanges' over `e` and `r`, binding into `sql` (PostgreSQL).
    func conditions(_ sql: inout CaptureFilter.SQL) -> (runs: String, exchanges: String) {
        var runs: [String] = []
        if let runIDs { runs.append("r.id = ANY(\(sql.bind(.text(Self.array(runIDs.map(String.init)))))::bigint[])") }
        if let labels { runs.append("r.label = ANY(\(sql.bind(.text(Self.array(labels))))::text[])") }
        var exchanges = runs
        if let since { exchanges.append("e.started >= \(sql.bind(.text(String(since))))::double precision") }
        if let until { exchanges.append("e.started < \(sql.bind(.text(String(until))))::double precision") }
        if let exchangeIDs {
            exchanges.append("e.id = ANY(\(sql.bind(.text(Self.array(exchangeIDs.map(String.init)))))::bigint[])")
        }
        let before = sql.conditions.count
        filter.compile(into: &sql)
        exchanges += sql.conditions[before...]
        sql.conditions.removeSubrange(before...)
        let all = { (parts: [String]) in parts.isEmpty ? "TRUE" : parts.joined(separator: " AND ") }
        return (all(runs), all(exchanges))
    }

    /// A PostgreSQL array literal of text (`{"a","b"}`), bound as one parameter.
    private static func array(_ items: [String]) -> String {
        "{" + items.map { "\"" + $0.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            + "\"" }.joined(separator: ",") + "}"
    }
}

/// Copies a selection of the team store into a capture file, row for row with the store's ids: `capture copy URL
/// FILE`, and every reader of the store (`show`, `har`, `report`, `view`), which then read the file with the
/// capture file's own reader. One reader, one query language, one set of exports for both kinds of store.
///
/// Theory of operation. One read-only, repeatable-read transaction sees one snapshot of the store. The exchanges
/// matching the selection are read through a cursor, a thousand rows at a time (bounded memory, progress), and
/// with them exactly the rows they refer to: their runs, connections, decisions and handshakes, bodies, and their
/// connections' trace chunks. Rows are inserted with `INSERT OR REPLACE`, so copying again into the same file
/// (the live view's `PostgresMirror`) refreshes rows instead of failing on them.
public enum PostgresSnapshot {
    /// Rows fetched per round trip.
    static let fetchSize = 1000

    /// Copies `selection` of the store at `source` into the capture at `path` (created when missing, with the
    /// capture file's schema). `progress` is told exchanges copied and the total, after each fetch. Returns the exchanges copied.
    @discardableResult
    public static func copy(
        from source: PostgresLocation, selection: TeamStoreSelection, into path: String,
        progress: ((Int, Int) -> Void)? = nil
    ) throws(CaptureFileError) -> Int {
        let connection: PostgresConnection
        do { connection = try PostgresConnection(source, applicationName: "atsproxy reader") } catch {
            throw CaptureFileError(path: source.redacted, problem: .cannotOpen(error.message))
        }
        defer { connection.close() }
        let queue = try openTarget(path)
        defer {
            do { try queue.close() } catch {
                // Closing a connection whose statements are finished fails only on a bug in this code; the rows
                // were committed before, and the file stays readable.
            }
        }
        do {
            return try copy(connection, selection, queue, progress)
        } catch let error as CaptureFileError {
            throw error
        } catch let error as PostgresError {
            connection.rollback()
            throw CaptureFileError(path: source.redacted, problem: .cannotRead(error.message))
        } catch {
            throw CaptureFileError.writing(path, error)
        }
    }

    /// Leaves a copied capture as a capture file is after its run: the write-ahead log folded back, one
    /// self-contained file in rollback-journal mode.
    public static func seal(_ path: String) throws(CaptureFileError) {
        SQLiteSetup.ensure()
        do {
            let queue = try DatabaseQueue(path: path)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
            }
            try queue.close()
        } catch {
            throw CaptureFileError.writing(path, error)
        }
    }

    /// A capture file at `path` to copy into: a new one made with the capture's schema, or an existing capture.
    static func openTarget(_ path: String) throws(CaptureFileError) -> DatabaseQueue {
        if case .sqlite = try CaptureFile.find(path) {
            let check = try CaptureFile.openReadOnly(path)
            do { try check.read { db in try CaptureFile.check(db, path: path, thorough: false) } } catch let error as CaptureFileError {
                throw error
            } catch {
                throw CaptureFileError.reading(path, error)
            }
            do { try check.close() } catch { throw CaptureFileError.reading(path, error) }
        } else {
            // A new file, private as a capture is (bodies may hold secrets).
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else {
                throw CaptureFileError(path: path, problem: .cannotOpen(String(cString: strerror(errno))))
            }
            close(fd)
        }
        SQLiteSetup.ensure()
        var configuration = Configuration()
        configuration.label = "atsproxy.capture.copy"
        configuration.busyMode = .timeout(CaptureWriter.busyTimeout)
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            try queue.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA page_size = \(CaptureWriter.pageSize)")
                try db.execute(sql: "PRAGMA journal_mode = WAL")
                try db.execute(sql: "PRAGMA synchronous = NORMAL")
            }
            try CaptureSchema.migrator.migrate(queue)
            return queue
        } catch {
            throw CaptureFileError.writing(path, error)
        }
    }

    private static func copy(
        _ connection: PostgresConnection, _ selection: TeamStoreSelection, _ queue: DatabaseQueue,
        _ progress: ((Int, Int) -> Void)?
    ) throws -> Int {
        var sql = CaptureFilter.SQL(dialect: .postgres)
        let (runs, exchanges) = selection.conditions(&sql)
        let parameters = sql.postgresParameters
        let picked = "SELECT e.id, e.run_id, e.connection_id, e.decision_id, e.handshake_id FROM exchanges e "
            + "JOIN runs r ON r.id = e.run_id WHERE \(exchanges)"
            + (selection.newest.map { " ORDER BY e.id DESC LIMIT \($0)" } ?? "")
        try connection.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        let total = Int(try connection.execute("SELECT count(*) FROM (\(picked)) p", parameters).scalar ?? "0") ?? 0
        let tables = Dictionary(uniqueKeysWithValues: PostgresSchema.copiedTables.map { ($0.name, $0.columns) })
        // Columns added by steps the store lacks (only older proxies wrote to it) read as NULL.
        let steps = Set(try connection.execute("SELECT step FROM atsproxy_schema").rows.compactMap { $0[0] })
        let absent = Set(
            PostgresSchema.addedColumnSteps.filter { !steps.contains($0.value) }.map { "exchanges." + $0.key.column.name })
        func columns(_ table: String, _ alias: String) -> String {
            (tables[table] ?? []).map { absent.contains("\(table).\($0.0)") ? "NULL" : "\(alias).\($0.0)" }
                .joined(separator: ", ")
        }
        // The rows the exchanges refer to, before the exchanges (small: one per run, connection, distinct verdict).
        let referenced: [(String, String)] = [
            ("runs", "SELECT \(columns("runs", "r")) FROM runs r WHERE \(runs) AND r.id IN (SELECT p.run_id FROM (\(picked)) p)"),
            ("connections", """
                SELECT \(columns("connections", "c")) FROM connections c
                WHERE (c.run_id, c.connection_id) IN (SELECT p.run_id, p.connection_id FROM (\(picked)) p)
                """),
            ("decisions", "SELECT \(columns("decisions", "d")) FROM decisions d WHERE d.id IN (SELECT p.decision_id FROM (\(picked)) p)"),
            ("handshakes", "SELECT \(columns("handshakes", "h")) FROM handshakes h WHERE h.id IN (SELECT p.handshake_id FROM (\(picked)) p)"),
        ]
        for (table, query) in referenced {
            try insert(try connection.execute(query, parameters), into: table, columns: tables[table] ?? [], queue)
        }
        // Large: through cursors, a fetch at a time.
        let streamed: [(String, String)] = [
            ("exchanges", """
                SELECT \(columns("exchanges", "e")) FROM exchanges e WHERE e.id IN (SELECT p.id FROM (\(picked)) p)
                ORDER BY e.id
                """),
            ("exchange_bodies", """
                SELECT \(columns("exchange_bodies", "b")) FROM exchange_bodies b
                WHERE b.id IN (SELECT p.id * 2 FROM (\(picked)) p UNION ALL SELECT p.id * 2 + 1 FROM (\(picked)) p)
                """),
            ("trace_chunks", """
                SELECT \(columns("trace_chunks", "t")) FROM trace_chunks t
                WHERE (t.run_id, t.connection_id) IN (SELECT p.run_id, p.connection_id FROM (\(picked)) p)
                ORDER BY t.id
                """),
        ]
        var copied = 0
        for (table, query) in streamed {
            try connection.execute("DECLARE rows NO SCROLL CURSOR FOR \(query)", parameters)
            while true {
                let rows = try connection.execute("FETCH \(fetchSize) FROM rows")
                if rows.rows.isEmpty { break }
                try insert(rows, into: table, columns: tables[table] ?? [], queue)
                if table == "exchanges" {
                    copied += rows.rows.count
                    progress?(copied, total)
                }
            }
            try connection.execute("CLOSE rows")
        }
        try connection.execute("COMMIT")
        return copied
    }

    /// Inserts rows of text values (libpq's text format) into `table`, each converted to its column's kind.
    private static func insert(
        _ rows: PostgresRows, into table: String, columns: [(String, PostgresSchema.ColumnKind)], _ queue: DatabaseQueue
    ) throws {
        guard !rows.rows.isEmpty else { return }
        let sql = "INSERT OR REPLACE INTO \(table) (\(columns.map(\.0).joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
        try queue.write { db in
            let statement = try db.cachedStatement(sql: sql)
            for row in rows.rows {
                var values: [DatabaseValue] = []
                values.reserveCapacity(columns.count)
                for (index, column) in columns.enumerated() {
                    values.append(try value(row[index], column.1, column: column.0))
                }
                try statement.execute(arguments: StatementArguments(values))
            }
        }
    }

    private static func value(_ text: String?, _ kind: PostgresSchema.ColumnKind, column: String) throws -> DatabaseValue {
        guard let text else { return .null }
        switch kind {
        case .text:
            return text.databaseValue
        case .integer:
            guard let v = Int64(text) else { throw PostgresSnapshotError(column: column, text: text) }
            return v.databaseValue
        case .real:
            guard let v = Double(text) else { throw PostgresSnapshotError(column: column, text: text) }
            return v.databaseValue
        case .blob:
            guard let bytes = hexBytes(text) else { throw PostgresSnapshotError(column: column, text: "bytea") }
            return Data(bytes).databaseValue
        }
    }

    /// bytea in its hex output format: `\x` and two hex digits per byte.
    static func hexBytes(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else {
            return nil
        }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity((utf8.count - 2) / 2)
        var i = 2
        while i < utf8.count {
            guard let high = nibble(utf8[i]), let low = nibble(utf8[i + 1]) else { return nil }
            out.append(high << 4 | low)
            i += 2
        }
        return out
    }
}

/// A value the store sent that its column's kind cannot hold (a schema this build does not expect).
struct PostgresSnapshotError: Error, CustomStringConvertible {
    var column: String
    var text: String
    var description: String { "the store's \(column) holds \(text), which this build cannot read" }
}
