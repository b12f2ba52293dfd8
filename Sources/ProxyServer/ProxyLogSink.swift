import Foundation
import ProxyCore
import ProxyTrace

/// Where sessions' logs go: one console line per exchange on stdout (coloured only on a terminal), notices and
/// CFNetwork-style records on stderr, JSON events to a file. Shared by every loop thread. Identical notices are folded
/// (`RepeatedNoticeFilter`): shown at most once a minute, with a count of the times they were not.
///
/// Console lines are buffered and written together, at most `consoleDelay` after the first of them: one `write(2)`
/// per exchange cost a fifth of the proxy's CPU under load (measured with stdout to a file: 69 µs per keep-alive
/// request with `--quiet`, 88 µs with a line each).
public final class ProxyLogSink: @unchecked Sendable {
    // @unchecked: all mutable state (the writer's sequence number, the file handle, the console buffer) is guarded by
    // `lock`; `consoleWriteLock` orders the console writes.
    private let lock = NSLock()
    private var diagnostics: DiagnosticsWriter
    private var notices = RepeatedNoticeFilter()
    /// The `--log-json` file's descriptor, or -1; set to -1 (and closed) after a write to it failed.
    private var jsonFD: Int32 = -1
    private let jsonPath: String?
    private let colour: Bool
    private let quiet: Bool
    private var pendingConsole: [UInt8] = []
    private var consoleFlushScheduled = false
    private let consoleWriteLock = NSLock()
    private let consoleQueue = DispatchQueue(label: "atsproxy.console")

    /// How long a console line may wait for others to share its write.
    static let consoleDelay: DispatchTimeInterval = .milliseconds(50)
    /// Buffered console bytes from which the thread that adds a line writes them out itself: memory stays bounded
    /// when stdout is slower than the traffic (a terminal scrolling), at the cost of that thread waiting, as it did
    /// for every line before.
    static let consoleLimit = 1 << 20

    /// - Parameters:
    ///   - diagnosticsLevel: 0 (off) to 3.
    ///   - jsonPath: `--log-json FILE`, created or truncated.
    ///   - quiet: no per-exchange console lines (benchmarks).
    public init(diagnosticsLevel: Int, jsonPath: String?, quiet: Bool) throws {
        diagnostics = DiagnosticsWriter(level: diagnosticsLevel)
        if let jsonPath {
            // open(2) rather than FileManager.createFile: its errno tells a missing directory from a permission
            // problem, where createFile only says "failed".
            let fd = open(jsonPath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw LogFileError(path: jsonPath, errno: errno) }
            jsonFD = fd
        }
        self.jsonPath = jsonPath
        colour = isatty(STDOUT_FILENO) == 1
        self.quiet = quiet
    }

    func write(_ entry: ProxyLog) {
        if case .exchange(let summary) = entry {
            // Quiet drops every exchange line: no need to take the lock that all loop threads share.
            if !quiet { addConsoleLine(summary.consoleLine(colour: colour)) }
            return
        }
        lock.lock()
        defer { lock.unlock() }
        switch entry {
        case .exchange:
            break
        case .notice(let text, let kind):
            let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
            for line in notices.admit(text, kind: kind, now: now) { Self.writeNotice(line) }
        case .diagnostics(let record):
            if let text = diagnostics.render(record, at: TraceTime(unixTime: Date().timeIntervalSince1970)) {
                Self.writeToStandardError(text)
            }
        case .event(let event):
            guard jsonFD >= 0 else { return }
            let line: String
            do { line = try event.jsonLine() + "\n" } catch {
                Self.writeToStandardError("atsproxy: cannot encode a JSON log event: \(error)\n")
                return
            }
            let code = Self.writeAll(jsonFD, Array(line.utf8))
            guard code != 0 else { return }
            // A full disk or a failed device: the proxy goes on without the log, and says so once.
            close(jsonFD)
            jsonFD = -1
            Self.writeNotice(
                "cannot write the JSON log \(jsonPath ?? ""): \(String(cString: strerror(code))); "
                    + "no more events are written to it (the proxy goes on)")
        }
    }

    deinit {
        if jsonFD >= 0 { close(jsonFD) }
    }

    /// Writes all of `bytes` to `fd`, going on after interrupted or partial writes; 0, or the errno that stopped it.
    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Foundation.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                offset += n
            }
            return 0
        }
    }

    private static func writeNotice(_ line: String) {
        writeToStandardError("atsproxy: " + line + "\n")
    }

    /// Writes `text` to stderr. When stderr is gone (the terminal was closed, which also sends SIGHUP, or a pipe's
    /// reader exited) the text is lost and the proxy carries on: `FileHandle.write(_:)` would trap on the error and
    /// end the process before it could finish its exchanges and flush its logs.
    public static func writeToStandardError(_ text: String) {
        do { try FileHandle.standardError.write(contentsOf: Data(text.utf8)) } catch {
            return  // nowhere left to report it
        }
    }

    /// Prints the counts of folded notices not yet reported (see `RepeatedNoticeFilter`). Call it before exiting.
    public func flushFoldedNotices() {
        lock.lock()
        defer { lock.unlock() }
        for line in notices.drain() { Self.writeNotice(line) }
    }

    private func addConsoleLine(_ line: String) {
        lock.lock()
        pendingConsole.append(contentsOf: line.utf8)
        pendingConsole.append(UInt8(ascii: "\n"))
        let full = pendingConsole.count >= Self.consoleLimit
        let schedule = !full && !consoleFlushScheduled
        if schedule { consoleFlushScheduled = true }
        lock.unlock()
        if full {
            flushConsole()
        } else if schedule {
            consoleQueue.asyncAfter(deadline: .now() + Self.consoleDelay) { [self] in flushConsole() }
        }
    }

    /// Writes the console lines still buffered, in order. The flush timer calls it; call it before exiting.
    public func flushConsole() {
        consoleWriteLock.lock()
        defer { consoleWriteLock.unlock() }
        lock.lock()
        let bytes = pendingConsole
        pendingConsole = []
        consoleFlushScheduled = false
        lock.unlock()
        guard !bytes.isEmpty else { return }
        do { try FileHandle.standardOutput.write(contentsOf: bytes) } catch {
            // stdout is gone (a closed pipe): the lines have nowhere to go, and the proxy carries on without them.
            return
        }
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
