/// Where a proxy's capture goes: a capture file (`CaptureWriter`) or the team store in PostgreSQL
/// (`PostgresCaptureWriter`). The capture sink hands each batch to one, on its writer thread.
public protocol CaptureDestination: AnyObject, Sendable {
    /// The file's path, or the store's URI with any password hidden: safe to print.
    var location: String { get }
    /// This run's id in the destination.
    var runID: Int64 { get }
    /// Exchanges committed so far.
    var exchangesWritten: Int { get }
    /// Told once per episode when writes wait or fail for a while and the capture goes on (a lock, an outage).
    var busyNotice: (@Sendable (String) -> Void)? { get set }
    /// What the sink does when entries come faster than this destination takes them. A file waits (the proxy slows
    /// to the disk's pace: a capture file is the session's record); the team store, a database on the network
    /// that may be down for minutes, drops and counts instead, so the proxy never stalls.
    var dropsWhenBehind: Bool { get }
    /// Batches are held to write later (the database is down): the sink calls `write` again, with an empty batch
    /// when nothing new came, about once a second, so the destination reconnects and catches up by itself.
    var wantsRetry: Bool { get }
    /// Writes `batch` (or keeps it to write later); throws only when the capture cannot go on.
    func write(_ batch: borrowing CaptureBatch) throws(CaptureFileError)
    /// Ends the run at `ended` (Unix seconds) and closes the destination.
    func close(ended: Double) throws(CaptureFileError)
    /// Undoes `open` for a run that never started (the proxy could not listen): nothing of the run is left.
    /// Instead of `close`, not after it.
    func discard() throws(CaptureFileError)
}

extension CaptureDestination {
    public var dropsWhenBehind: Bool { false }
    public var wantsRetry: Bool { false }
}
