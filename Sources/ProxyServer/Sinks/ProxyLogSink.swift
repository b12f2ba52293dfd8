import Foundation
import ProxyTrace

/// Where sessions' records go: the fan-out to every `LogSink`. Shared by every loop thread.
///
/// The standard sinks, and what each does when it cannot keep up:
/// - `ConsoleSink`: one line per exchange on stdout, batched (at most 50 ms late); backpressure past 1 MiB.
/// - `StandardErrorSink`: notices (folded) and CFNetwork-style trace records on stderr, on a thread of its own
///   behind a `QueuedSink` with backpressure (nothing lost or reordered).
/// - `JSONLogSink` (`--log-json`): JSON events to a file, behind a `QueuedSink` with backpressure.
/// - `CaptureSink` (`--capture`): exchange and trace records into a SQLite capture, batched on its own writer
///   thread; backpressure bounded by entries and bytes, and it stops (said once) when the file takes no more writes.
///
/// A new sink is one type conforming to `LogSink` and one `add(_:)` call.
public final class ProxyLogSink: @unchecked Sendable {
    // @unchecked: `sinks` is set up before the proxy starts (`add` before the first `write`) and only read after.
    private var sinks: [any LogSink] = []
    private let standardError: StandardErrorSink
    private let queuedStandardError: QueuedSink

    /// - Parameters:
    ///   - diagnosticsLevel: 0 (off) to 3.
    ///   - jsonPath: `--log-json FILE`, created or truncated.
    ///   - quiet: no per-exchange console lines (benchmarks).
    public init(diagnosticsLevel: Int, jsonPath: String?, quiet: Bool) throws {
        standardError = StandardErrorSink(diagnosticsLevel: diagnosticsLevel)
        queuedStandardError = QueuedSink(standardError, overflow: .backpressure, name: "atsproxy.stderr")
        if !quiet { sinks.append(ConsoleSink(colour: isatty(STDOUT_FILENO) == 1)) }
        sinks.append(queuedStandardError)
        if let jsonPath {
            let notices = queuedStandardError
            let json = try JSONLogSink(path: jsonPath) { text in notices.consume(.notice(text)) }
            sinks.append(QueuedSink(json, overflow: .backpressure, name: "atsproxy.json"))
        }
    }

    /// Says `text` on stderr as a notice (`atsproxy: …`), in order with the trace: for sinks that report their own
    /// failures (a capture whose disk is full).
    public func notice(_ text: String) {
        queuedStandardError.consume(.notice(text))
    }

    /// Adds a sink; call it before the proxy starts.
    public func add(_ sink: any LogSink) {
        sinks.append(sink)
    }

    /// Hands `entry` to every sink.
    func write(_ entry: ProxyLog) {
        for sink in sinks { sink.consume(entry) }
    }

    /// Writes out what every sink buffered (call before exiting), then the counts of folded notices.
    public func flushAll() {
        for sink in sinks { sink.flush() }
        standardError.flushFoldedNotices()
    }

    /// Writes `text` to stderr at once (for the CLI's own messages, outside the record stream).
    public static func writeToStandardError(_ text: String) {
        StandardErrorSink.write(text)
    }
}

/// Why the `--log-json` file could not be created, in words that name the path and the real cause.
public struct LogFileError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The path given to `--log-json`.
    public let path: String
    /// The cause, e.g. "the directory /nonexistent/dir does not exist".
    public let reason: String

    /// The error for `path` after `open(2)` failed with `errno`.
    public init(path: String, errno code: Int32) {
        self.path = path
        let folder = (path as NSString).deletingLastPathComponent
        let shownFolder = folder.isEmpty ? "." : folder
        switch code {
        case ENOENT: reason = "the directory \(shownFolder) does not exist"
        case ENOTDIR: reason = "a part of \(shownFolder) is not a directory"
        case EACCES, EPERM: reason = "permission denied"
        case EISDIR: reason = "it is a directory, not a file"
        case EROFS: reason = "\(shownFolder) is on a read-only file system"
        default: reason = String(cString: strerror(code))
        }
    }

    public var description: String { "cannot create \(path): \(reason)" }
}
