import Foundation
import GRDB

/// A capture file that follows the team store (`atsproxy view postgresql://…`): the selection copied once, then
/// every `interval` the exchanges committed since, so the web view, which follows a capture file as a proxy
/// writes it, shows every proxy's new exchanges. Polling: LISTEN/NOTIFY would need every writer to notify, and a
/// poll of the ids above a mark is one index range scan.
///
/// Theory of operation. Exchange ids come from one sequence, but proxies commit their batches in their own time:
/// an id below the highest one seen can still arrive (a batch that took its ids before another proxy's committed).
/// Each poll therefore lists the store's ids above a mark that trails by `settle` seconds (longer than a batch's
/// transaction may last: the writer's statement timeout), compares them with the file's, and copies only those the
/// file lacks, with the rows they refer to (`PostgresSnapshot`).
public final class PostgresMirror: @unchecked Sendable {
    // @unchecked: used from one thread at a time (the view's poll thread, after `start` on the command's).
    public let source: PostgresLocation
    public let path: String
    private let selection: TeamStoreSelection
    /// Seconds a batch's ids may take to commit.
    static let settle = 60.0
    /// Below this id, every exchange the selection matches is in the file.
    private var mark: Int64 = 0
    /// (time, highest id) of past polls, for moving `mark`.
    private var samples: [(time: Double, id: Int64)] = []
    private var connection: PostgresConnection?

    public init(source: PostgresLocation, selection: TeamStoreSelection, path: String) {
        self.source = source
        self.selection = selection
        self.path = path
    }

    /// The first copy (with progress). Returns the exchanges copied.
    @discardableResult
    public func start(progress: ((Int, Int) -> Void)? = nil) throws(CaptureFileError) -> Int {
        let copied = try PostgresSnapshot.copy(from: source, selection: selection, into: path, progress: progress)
        let highest = try localIDs(above: 0, limit: 1).first ?? 0
        // Batches in flight during the copy took ids below the highest: the first polls look back that far.
        mark = max(0, highest - 10_000)
        samples = [(Date().timeIntervalSince1970, highest)]
        return copied
    }

    /// Copies the exchanges committed since the last poll. Returns how many.
    @discardableResult
    public func poll(now: Double = Date().timeIntervalSince1970) throws(CaptureFileError) -> Int {
        let remote: [Int64]
        do throws(PostgresError) {
            if connection == nil || connection?.isOpen == false {
                connection = try PostgresConnection(source, applicationName: "atsproxy view")
            }
            var sql = CaptureFilter.SQL(dialect: .postgres)
            let (_, exchanges) = selection.conditions(&sql)
            let parameters = sql.postgresParameters
            let query = "SELECT e.id FROM exchanges e JOIN runs r ON r.id = e.run_id WHERE \(exchanges) AND e.id > \(mark)"
            remote = try connection?.execute(query, parameters).rows.compactMap { $0[0].flatMap { Int64($0) } } ?? []
        } catch {
            connection?.close()
            connection = nil
            throw CaptureFileError(path: source.redacted, problem: .cannotRead(error.message))
        }
        let local = Set(try localIDs(above: mark, limit: nil))
        let missing = remote.filter { !local.contains($0) }
        if !missing.isEmpty {
            var newRows = selection
            newRows.exchangeIDs = missing
            newRows.newest = nil
            try PostgresSnapshot.copy(from: source, selection: newRows, into: path)
        }
        samples.append((now, max(remote.max() ?? 0, samples.last?.id ?? 0)))
        if let settled = samples.last(where: { now - $0.time >= Self.settle }) {
            mark = max(mark, settled.id)
            samples.removeAll { $0.time < settled.time }
        }
        return missing.count
    }

    /// The file's exchange ids above `id`, newest first.
    private func localIDs(above id: Int64, limit: Int?) throws(CaptureFileError) -> [Int64] {
        do {
            let queue = try CaptureFile.openReadOnly(path)
            defer {
                do { try queue.close() } catch {
                    // A read-only connection with no statement left open closes; nothing to keep if it does not.
                }
            }
            return try queue.read { db in
                try Int64.fetchAll(
                    db, sql: "SELECT id FROM exchanges WHERE id > ? ORDER BY id DESC" + (limit.map { " LIMIT \($0)" } ?? ""),
                    arguments: [id])
            }
        } catch let error as CaptureFileError {
            throw error
        } catch {
            throw CaptureFileError.reading(path, error)
        }
    }
}
