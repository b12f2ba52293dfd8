import Foundation
import ProxyTrace

/// Notices (`atsproxy: …`) and CFNetwork-style trace records on stderr, in the order they came. Identical notices,
/// or notices of one kind, are folded (`RepeatedNoticeFilter`): shown at most once a minute, with a count of the
/// times they were not. Run behind a `QueuedSink` with backpressure: a trace at level 3 writes a lot, and no record
/// may be lost or reordered.
public final class StandardErrorSink: LogSink, @unchecked Sendable {
    // @unchecked: `diagnostics` and the writing are guarded by `lock`, `notices` by `noticeLock` (taken inside `lock`
    // when both are held).
    private let lock = NSLock()
    private var diagnostics: DiagnosticsWriter
    /// Its own lock, held only for the filter's bookkeeping and never while writing: `accepts` takes it on the loop
    /// threads, which must not wait behind a slow stderr.
    private let noticeLock = NSLock()
    private var notices = RepeatedNoticeFilter()
    /// The `--diagnostics` level: records above it are not even queued (a capture makes sessions produce level-1
    /// records whatever the level, and the console's stderr must not change).
    private let level: Int

    /// - Parameter diagnosticsLevel: 0 (no trace records) to 3.
    public init(diagnosticsLevel: Int) {
        diagnostics = DiagnosticsWriter(level: diagnosticsLevel)
        level = diagnostics.level
    }

    public func consume(_ entry: ProxyLog) {
        switch entry {
        case .notice(let text, let kind):
            lock.lock()
            defer { lock.unlock() }
            noticeLock.lock()
            let lines = notices.admit(text, kind: kind, now: Self.now())
            noticeLock.unlock()
            for line in lines { Self.writeNotice(line) }
        case .diagnostics(let record):
            lock.lock()
            defer { lock.unlock() }
            if let text = diagnostics.render(record, at: TraceTime(unixTime: Date().timeIntervalSince1970)) {
                Self.write(text)
            }
        case .exchange, .event:
            return
        }
    }

    /// For a notice, the folding happens here, on the thread that made it (`QueuedSink` asks once per entry, before
    /// queueing): a repeat shown less than a minute ago is counted and not queued. A notice that recurs on every
    /// connection (a client's odd SNI, a CA it does not trust) would otherwise wake the stderr thread once per
    /// connection, and the loop thread would contend with it for the queue's lock, only for the repeat to be folded.
    public func accepts(_ entry: ProxyLog) -> Bool {
        switch entry {
        case .notice(let text, let kind):
            noticeLock.lock()
            defer { noticeLock.unlock() }
            return !notices.foldIfShownRecently(text, kind: kind, now: Self.now())
        case .diagnostics(let record): return level > 0 && record.level <= level
        case .exchange, .event: return false
        }
    }

    public func flush() {}

    /// Prints the counts of folded notices not yet reported. Call it before exiting.
    public func flushFoldedNotices() {
        lock.lock()
        defer { lock.unlock() }
        noticeLock.lock()
        let lines = notices.drain()
        noticeLock.unlock()
        for line in lines { Self.writeNotice(line) }
    }

    /// Seconds on the monotonic clock the filter's interval is measured on.
    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    static func writeNotice(_ line: String) {
        write("atsproxy: " + line + "\n")
    }

    /// Writes `text` to stderr. When stderr is gone (the terminal was closed, which also sends SIGHUP, or a pipe's
    /// reader exited) the text is lost and the proxy carries on: `FileHandle.write(_:)` would trap on the error and
    /// end the process before it could finish its exchanges and flush its logs.
    static func write(_ text: String) {
        do { try FileHandle.standardError.write(contentsOf: Data(text.utf8)) } catch {
            return  // nowhere left to report it
        }
    }
}
