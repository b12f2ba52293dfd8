import Foundation
import ProxyTrace

/// Notices (`atsproxy: …`) and CFNetwork-style trace records on stderr, in the order they came. Identical notices,
/// or notices of one kind, are folded (`RepeatedNoticeFilter`): shown at most once a minute, with a count of the
/// times they were not. Run behind a `QueuedSink` with backpressure: a trace at level 3 writes a lot, and no record
/// may be lost or reordered.
public final class StandardErrorSink: LogSink, @unchecked Sendable {
    // @unchecked: `diagnostics` and `notices` are guarded by `lock`.
    private let lock = NSLock()
    private var diagnostics: DiagnosticsWriter
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
            let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
            for line in notices.admit(text, kind: kind, now: now) { Self.writeNotice(line) }
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

    public func accepts(_ entry: ProxyLog) -> Bool {
        switch entry {
        case .notice: true
        case .diagnostics(let record): level > 0 && record.level <= level
        case .exchange, .event: false
        }
    }

    public func flush() {}

    /// Prints the counts of folded notices not yet reported. Call it before exiting.
    public func flushFoldedNotices() {
        lock.lock()
        defer { lock.unlock() }
        for line in notices.drain() { Self.writeNotice(line) }
    }

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
