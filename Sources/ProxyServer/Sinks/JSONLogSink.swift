import Foundation
import ProxyTrace

/// `--log-json FILE`: one JSON object per event, one per line. Run behind a `QueuedSink` with backpressure: a
/// reader of the log expects every event. A failed write (a full disk) is reported once, the log ends there, and
/// the proxy goes on; what was written stays.
public final class JSONLogSink: LogSink, @unchecked Sendable {
    // @unchecked: `fd` is touched only under `lock`.
    private let lock = NSLock()
    /// The file's descriptor, or -1 after a write to it failed.
    private var fd: Int32
    private let path: String
    private let notice: @Sendable (String) -> Void

    /// Creates or truncates `path`. `notice` reports a failed write.
    public init(path: String, notice: @escaping @Sendable (String) -> Void) throws(LogFileError) {
        // open(2) rather than FileManager.createFile: its errno tells a missing directory from a permission problem,
        // where createFile only says "failed".
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw LogFileError(path: path, errno: errno) }
        self.fd = fd
        self.path = path
        self.notice = notice
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    public func consume(_ entry: ProxyLog) {
        guard case .event(let event) = entry else { return }
        lock.lock()
        defer { lock.unlock() }
        guard fd >= 0 else { return }
        let line: String
        do { line = try event.jsonLine() + "\n" } catch {
            notice("cannot encode a JSON log event: \(error)")
            return
        }
        let code = Self.writeAll(fd, Array(line.utf8))
        guard code != 0 else { return }
        close(fd)
        fd = -1
        notice(
            "cannot write the JSON log \(path): \(String(cString: strerror(code))); no more events are written to it "
                + "(the proxy goes on)")
    }

    public func accepts(_ entry: ProxyLog) -> Bool {
        if case .event = entry { true } else { false }
    }

    public func flush() {}

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
}
