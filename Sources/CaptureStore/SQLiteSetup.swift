import CSQLiteConfig
import GRDBSQLite

/// SQLite's process-wide configuration, applied once before this module opens its first connection.
///
/// Every connection the capture code opens is a GRDB queue, which runs one closure at a time on it, so SQLite's
/// own per-call locking is pure cost: the writer binds some forty values per exchange, and with SQLite's default
/// (serialized) mode and memory statistics each bind, step and allocation took a mutex, 8% of the writer thread's
/// samples under load. GRDB supports only this use (its connections are multi-thread, never shared unserialised).
enum SQLiteSetup {
    /// Whether the configuration took: false when something opened SQLite before (a test, say), in which case the
    /// defaults stay, which are only slower.
    static let applied: Bool = csqlite_configure_single_thread_connections() == SQLITE_OK

    /// Call before opening a connection.
    static func ensure() { _ = applied }
}
