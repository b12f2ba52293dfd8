import GRDB
import GRDBSQLite

/// One execution of a prepared statement (a GRDB cached statement), its parameters bound in order through SQLite's C
/// API. The writer inserts rows of some thirty columns thousands of times a second: GRDB's `StatementArguments`
/// box each value as a `DatabaseValue` in an array, which cost more than SQLite's own insert. Text is bound from the
/// String's UTF-8 or from bytes the writer assembled, copied once by SQLite (`SQLITE_TRANSIENT`).
///
/// Used inside a GRDB write (its connection, its transaction); `run()` steps the statement and resets it.
struct SQLiteInsert: ~Copyable {
    private let statement: SQLiteStatement
    private let connection: SQLiteConnection?
    private var index: Int32 = 0
    /// The first binding error, thrown by `run()`.
    private var bindFailure: Int32 = SQLITE_OK

    init(_ statement: Statement, _ db: Database) {
        self.statement = statement.sqliteStatement
        connection = db.sqliteConnection
        sqlite3_reset(self.statement)
    }

    private mutating func next() -> Int32 {
        index += 1
        return index
    }

    private mutating func check(_ code: Int32) {
        if code != SQLITE_OK && bindFailure == SQLITE_OK { bindFailure = code }
    }

    mutating func null() {
        check(sqlite3_bind_null(statement, next()))
    }

    mutating func int(_ value: Int64?) {
        guard let value else { return null() }
        check(sqlite3_bind_int64(statement, next(), value))
    }

    mutating func int(_ value: Int?) {
        int(value.map(Int64.init))
    }

    mutating func bool(_ value: Bool?) {
        int(value.map { $0 ? 1 : 0 })
    }

    mutating func double(_ value: Double?) {
        guard let value else { return null() }
        check(sqlite3_bind_double(statement, next(), value))
    }

    mutating func text(_ value: String?) {
        guard var value else { return null() }
        let i = next()
        check(value.withUTF8 { Self.bindText(statement, i, $0) })
    }

    /// UTF-8 bytes bound as TEXT.
    mutating func text(bytes: [UInt8]) {
        let i = next()
        check(bytes.withUnsafeBufferPointer { Self.bindText(statement, i, $0) })
    }

    mutating func blob(_ bytes: [UInt8]) {
        let i = next()
        check(
            bytes.withUnsafeBytes { raw in
                // An empty buffer may have no address, which SQLite would bind as NULL.
                guard let base = raw.baseAddress else { return sqlite3_bind_zeroblob(statement, i, 0) }
                return sqlite3_bind_blob(statement, i, base, Int32(raw.count), sqliteTransient)
            })
    }

    private static func bindText(_ statement: SQLiteStatement, _ i: Int32, _ utf8: UnsafeBufferPointer<UInt8>) -> Int32 {
        // An empty buffer may have no address, which SQLite would bind as NULL: '' is bound from a literal.
        guard let base = utf8.baseAddress, !utf8.isEmpty else {
            return sqlite3_bind_text(statement, i, "", 0, sqliteTransient)
        }
        return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
            sqlite3_bind_text(statement, i, $0, Int32(utf8.count), sqliteTransient)
        }
    }

    /// Bytes of a capture batch bound as a BLOB, in place (see `bind(_:)`).
    mutating func blob(_ bytes: UnsafeRawBufferPointer) {
        let i = next()
        // An empty buffer may have no address, which SQLite would bind as NULL.
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return check(sqlite3_bind_zeroblob(statement, i, 0)) }
        check(sqlite3_bind_blob(statement, i, base, Int32(bytes.count), sqliteStatic))
    }

    /// A value of a capture batch. Text is bound in place (`SQLITE_STATIC`): the batch's bytes outlive the step, and
    /// the writer clears the bindings before the batch goes.
    mutating func bind(_ value: CaptureBatchReader.Value) {
        switch value {
        case .null: null()
        case .integer(let v): int(v)
        case .real(let v): double(v)
        case .text(let utf8):
            let i = next()
            guard let base = utf8.baseAddress, !utf8.isEmpty else {
                return check(sqlite3_bind_text(statement, i, "", 0, sqliteTransient))
            }
            check(sqlite3_bind_text(statement, i, base.assumingMemoryBound(to: CChar.self), Int32(utf8.count), sqliteStatic))
        }
    }

    /// Executes the statement with the values bound, then resets it for the next row.
    consuming func run() throws {
        defer { sqlite3_reset(statement) }
        guard bindFailure == SQLITE_OK else { throw error(bindFailure) }
        let code = sqlite3_step(statement)
        guard code == SQLITE_DONE else { throw error(code) }
    }

    private func error(_ code: Int32) -> DatabaseError {
        let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
        return DatabaseError(resultCode: ResultCode(rawValue: code), message: message)
    }
}

/// SQLite's `SQLITE_STATIC`: the bytes stay valid and unchanged while the statement uses them.
private let sqliteStatic: sqlite3_destructor_type? = nil

/// SQLite's `SQLITE_TRANSIENT`: SQLite copies the bytes before the bind call returns.
private let sqliteTransient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
