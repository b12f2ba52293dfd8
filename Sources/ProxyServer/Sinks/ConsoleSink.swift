import Foundation
import ProxyTrace

/// One line per exchange on stdout, coloured only on a terminal.
///
/// Lines are buffered and written together, at most `delay` after the first of them, on a queue of their own:
/// one `write(2)` per exchange cost a fifth of the proxy's CPU under load (measured with stdout to a file: 69 µs
/// per keep-alive request with `--quiet`, 88 µs with a line each). Overflow: backpressure. Past `limit` buffered
/// bytes (stdout slower than the traffic, a terminal scrolling) the loop thread that adds a line writes them out
/// itself, so memory stays bounded and no line is lost.
public final class ConsoleSink: LogSink, @unchecked Sendable {
    // @unchecked: `pending` and `flushScheduled` are guarded by `lock`; `writeLock` orders the writes.
    private let lock = NSLock()
    private let writeLock = NSLock()
    private let queue = DispatchQueue(label: "atsproxy.console")
    private var pending: [UInt8] = []
    private var flushScheduled = false
    private let colour: Bool

    /// How long a console line may wait for others to share its write.
    static let delay: DispatchTimeInterval = .milliseconds(50)
    /// Buffered bytes from which the adding thread writes them out itself.
    static let limit = 1 << 20

    public init(colour: Bool) {
        self.colour = colour
    }

    public func consume(_ entry: ProxyLog) {
        guard case .exchange(let exchange) = entry else { return }
        add(exchange.consoleLine(colour: colour))
    }

    public func accepts(_ entry: ProxyLog) -> Bool {
        if case .exchange = entry { true } else { false }
    }

    private func add(_ line: String) {
        lock.lock()
        pending.append(contentsOf: line.utf8)
        pending.append(UInt8(ascii: "\n"))
        let full = pending.count >= Self.limit
        let schedule = !full && !flushScheduled
        if schedule { flushScheduled = true }
        lock.unlock()
        if full {
            flush()
        } else if schedule {
            queue.asyncAfter(deadline: .now() + Self.delay) { [self] in flush() }
        }
    }

    /// Writes the lines still buffered, in order.
    public func flush() {
        writeLock.lock()
        defer { writeLock.unlock() }
        lock.lock()
        let bytes = pending
        pending = []
        flushScheduled = false
        lock.unlock()
        guard !bytes.isEmpty else { return }
        do { try FileHandle.standardOutput.write(contentsOf: bytes) } catch {
            // stdout is gone (a closed pipe): the lines have nowhere to go, and the proxy carries on without them.
            return
        }
    }
}
