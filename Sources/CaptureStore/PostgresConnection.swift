import CLibPQ
import Foundation

/// A PostgreSQL error: libpq's message, the SQLSTATE when the server gave one, and whether the connection itself
/// is gone (the server stopped, the network failed) rather than the statement refused.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var sqlState: String?
    public var connectionLost: Bool

    public var description: String { message }
}

/// One libpq connection, used by one thread at a time. Blocking: every call waits for the server, so it runs on the
/// capture's writer thread or in a reading command, never on an event loop.
///
/// The location is a libpq connection URI (`postgresql://user@host:5432/db`); libpq itself reads a password from
/// the URI, `$PGPASSWORD` or `~/.pgpass`, and the `PG*` environment variables. Nothing here prints the URI
/// unredacted (`PostgresLocation.redacted`).
final class PostgresConnection {
    private var connection: OpaquePointer?
    let location: PostgresLocation

    /// Connects, with a connect timeout of 5 s unless the URI sets its own, and says the connection is atsproxy's
    /// (`application_name`, shown in `pg_stat_activity`). Over TCP, a database that stops answering (a network
    /// partition, not a refusal) is given up after about 10 s (TCP keepalives and `tcp_user_timeout`), so the writer
    /// thread never waits on a dead connection for ever.
    init(_ location: PostgresLocation, applicationName: String = "atsproxy") throws(PostgresError) {
        self.location = location
        // Earlier keywords are defaults: the URI's own settings (expanded from `dbname`) override them.
        let keys = ["connect_timeout", "fallback_application_name", "keepalives", "keepalives_idle",
                    "keepalives_interval", "keepalives_count", "tcp_user_timeout", "dbname"]
        let values = ["5", applicationName, "1", "5", "2", "3", "10000", location.uri]
        let made: OpaquePointer? = keys.withCStrings { k in
            values.withCStrings { v in PQconnectdbParams(k, v, 1) }
        }
        connection = made
        guard let made, PQstatus(made) == CONNECTION_OK else {
            let message = made.map { Self.text(PQerrorMessage($0)) } ?? "out of memory"
            if let made { PQfinish(made) }
            connection = nil
            throw PostgresError(
                message: "cannot connect to \(location.redacted): \(message)", sqlState: nil, connectionLost: true)
        }
        // Notices (a table that already exists, …) are not the user's business: libpq prints them to stderr.
        PQsetNoticeProcessor(made, { _, _ in }, nil)
    }

    deinit { close() }

    func close() {
        if let connection { PQfinish(connection) }
        connection = nil
    }

    var isOpen: Bool {
        guard let connection else { return false }
        return PQstatus(connection) == CONNECTION_OK
    }

    /// Runs `sql` (one or more statements, no parameters) and returns the last result's rows.
    @discardableResult
    func execute(_ sql: String) throws(PostgresError) -> PostgresRows {
        let connection = try open()
        return try check(PQexec(connection, sql))
    }

    /// Runs one statement with text parameters (`$1`, `$2`, …; nil is NULL), and bytea parameters given as bytes.
    @discardableResult
    func execute(_ sql: String, _ parameters: [PostgresValue]) throws(PostgresError) -> PostgresRows {
        let connection = try open()
        var storage: [[UInt8]] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        var isNull: [Bool] = []
        for parameter in parameters {
            switch parameter {
            case .null:
                storage.append([])
                formats.append(0)
                isNull.append(true)
            case .text(let text):
                storage.append(Array(text.utf8) + [0])
                formats.append(0)
                isNull.append(false)
            case .bytes(let bytes):
                storage.append(bytes)
                formats.append(1)
                isNull.append(false)
            }
            lengths.append(Int32(storage[storage.count - 1].count))
        }
        let result: OpaquePointer? = withPointers(storage) { pointers in
            var values: [UnsafePointer<CChar>?] = pointers.enumerated().map { isNull[$0.offset] ? nil : $0.element }
            return PQexecParams(connection, sql, Int32(parameters.count), nil, &values, lengths, formats, 0)
        }
        return try check(result)
    }

    /// `COPY table (columns) FROM STDIN` with `data` in COPY's text format (`PostgresCopyText`).
    func copy(_ sql: String, data: [UInt8]) throws(PostgresError) {
        let connection = try open()
        try check(PQexec(connection, sql), expecting: PGRES_COPY_IN)
        var sent: Int32 = 1
        if !data.isEmpty {
            sent = data.withUnsafeBufferPointer { buffer in
                buffer.withMemoryRebound(to: CChar.self) { PQputCopyData(connection, $0.baseAddress, Int32($0.count)) }
            }
        }
        let ended = PQputCopyEnd(connection, sent == 1 ? nil : "the client could not send the rows")
        guard sent == 1, ended == 1 else { throw error(connection, nil) }
        try check(PQgetResult(connection))
        // COPY's last result is followed by a null one.
        while let extra = PQgetResult(connection) { PQclear(extra) }
    }

    /// Ends a failed transaction. A connection that is gone has none left to end: the server rolled it back.
    func rollback() {
        guard let connection, PQstatus(connection) == CONNECTION_OK else { return }
        if let result = PQexec(connection, "ROLLBACK") { PQclear(result) }
    }

    private func open() throws(PostgresError) -> OpaquePointer {
        guard let connection else {
            throw PostgresError(message: "\(location.redacted): not connected", sqlState: nil, connectionLost: true)
        }
        return connection
    }

    @discardableResult
    private func check(_ result: OpaquePointer?, expecting: ExecStatusType? = nil) throws(PostgresError) -> PostgresRows {
        guard let result else { throw error(connection, nil) }
        let status = PQresultStatus(result)
        if let expecting {
            guard status == expecting else { throw error(connection, result) }
            PQclear(result)
            return PostgresRows(columns: [], rows: [])
        }
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw error(connection, result) }
        defer { PQclear(result) }
        return PostgresRows(result)
    }

    private func error(_ connection: OpaquePointer?, _ result: OpaquePointer?) -> PostgresError {
        defer { if let result { PQclear(result) } }
        var message = result.map { Self.text(PQresultErrorMessage($0)) } ?? ""
        if message.isEmpty, let connection { message = Self.text(PQerrorMessage(connection)) }
        let state = result.flatMap { PQresultErrorField($0, Int32(UInt8(ascii: "C"))) }.map { String(cString: $0) }
        let lost = connection.map { PQstatus($0) != CONNECTION_OK } ?? true
            || state.map { $0.hasPrefix("08") || $0 == "57P01" || $0 == "57P02" || $0 == "57P03" } ?? false
        return PostgresError(
            message: message.isEmpty ? "unknown PostgreSQL error" : message, sqlState: state, connectionLost: lost)
    }

    static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        return String(cString: pointer).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// A parameter of `PostgresConnection.execute(_:_:)`.
enum PostgresValue {
    case null
    case text(String)
    case bytes([UInt8])

    init(_ value: Int64?) { self = value.map { .text(String($0)) } ?? .null }
    init(_ value: Double?) { self = value.map { .text(String($0)) } ?? .null }
    init(_ value: String?) { self = value.map { .text($0) } ?? .null }
}

extension CaptureFilter.SQL {
    /// The arguments as the team store's parameters (PostgreSQL infers each one's type from where it stands).
    var postgresParameters: [PostgresValue] {
        values.map { value in
            switch value {
            case .integer(let v): .text(String(v))
            case .text(let v): .text(v)
            }
        }
    }
}

/// A result's rows, every value as text (libpq's text format) or nil for NULL.
struct PostgresRows {
    var columns: [String]
    var rows: [[String?]]

    init(columns: [String], rows: [[String?]]) {
        self.columns = columns
        self.rows = rows
    }

    init(_ result: OpaquePointer) {
        let columnCount = PQnfields(result)
        columns = (0..<columnCount).map { String(cString: PQfname(result, $0)) }
        rows = (0..<PQntuples(result)).map { row in
            (0..<columnCount).map { column in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }

    /// The first row's first value.
    var scalar: String? { rows.first?.first ?? nil }
}

/// Where the team store is: a `postgresql://` or `postgres://` connection URI.
public struct PostgresLocation: Sendable, Equatable {
    public let uri: String

    /// Whether `text` names a PostgreSQL store rather than a capture file.
    public static func isURI(_ text: String) -> Bool {
        text.hasPrefix("postgresql://") || text.hasPrefix("postgres://")
    }

    public init?(_ text: String) {
        guard Self.isURI(text) else { return nil }
        uri = text
    }

    /// The URI with any password replaced by `***`, for messages: `postgresql://lab:***@db.example/atsproxy`.
    /// A password given as a query parameter (`?password=…`) is hidden too.
    public var redacted: String {
        var text = uri
        if let scheme = text.range(of: "://") {
            let rest = text[scheme.upperBound...]
            let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
            let authority = rest[..<authorityEnd]
            if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
                text.replaceSubrange(text.index(after: colon)..<at, with: "***")
            }
        }
        if let query = text.firstIndex(of: "?") {
            let parameters = text[text.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false)
            let shown = parameters.map { parameter -> String in
                parameter.lowercased().hasPrefix("password=") ? "password=***" : String(parameter)
            }
            text = String(text[...query]) + shown.joined(separator: "&")
        }
        return text
    }
}

extension Array where Element == String {
    /// The strings as a NULL-terminated array of C strings, valid inside `body`.
    fileprivate func withCStrings<R>(_ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let copies = map { strdup($0) }
        defer { copies.forEach { free($0) } }
        var pointers: [UnsafePointer<CChar>?] = copies.map { UnsafePointer($0) } + [nil]
        return pointers.withUnsafeMutableBufferPointer { body(UnsafePointer($0.baseAddress!)) }
    }
}

/// The byte arrays as C pointers, valid inside `body`.
private func withPointers<R>(_ storage: [[UInt8]], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = storage.map { bytes in
        let copy = UnsafeMutablePointer<CChar>.allocate(capacity: Swift.max(1, bytes.count))
        bytes.withUnsafeBufferPointer { source in
            guard let base = source.baseAddress, !source.isEmpty else { return }
            base.withMemoryRebound(to: CChar.self, capacity: source.count) { copy.update(from: $0, count: source.count) }
        }
        return copy
    }
    defer { copies.forEach { $0?.deallocate() } }
    return body(copies.map { UnsafePointer($0) })
}
