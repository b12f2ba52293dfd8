import Foundation
import ProxyTrace

/// Runs a sink's `consume` on a thread of its own, behind a bounded queue, so its I/O never runs on an event-loop
/// thread. What happens when the sink cannot keep up is the sink's documented choice:
///
/// - `.backpressure`: a full queue makes the loop thread that adds an entry wait for room. Nothing is lost; the
///   proxy slows to the sink's pace (the trace and the JSON log, whose readers expect every record).
/// - `.drop`: a full queue drops the new entry and counts it; `onDrop` is told the running count (at most once a
///   second), so the loss is said, not silent (a live view that falls behind).
public final class QueuedSink: LogSink, @unchecked Sendable {
    // @unchecked: `queue`, `dropped`, `busy` and `stopped` are touched only under `condition`.
    public enum Overflow: Sendable { case backpressure, drop }

    private let sink: any LogSink
    private let capacity: Int
    private let overflow: Overflow
    private let onDrop: (@Sendable (Int) -> Void)?
    private let condition = NSCondition()
    private var queue: [ProxyLog] = []
    private var busy = false
    private var dropped = 0
    private var lastDropReport = 0.0

    /// - Parameters:
    ///   - capacity: entries that may wait (at least 1).
    ///   - onDrop: with `.drop`, called with the total dropped so far.
    public init(
        _ sink: any LogSink, capacity: Int = 4096, overflow: Overflow, name: String,
        onDrop: (@Sendable (Int) -> Void)? = nil
    ) {
        self.sink = sink
        self.capacity = max(1, capacity)
        self.overflow = overflow
        self.onDrop = onDrop
        let thread = Thread { [self] in run() }
        thread.name = name
        thread.start()
    }

    /// The wrapped sink's answer. `consume` asks it itself, once per entry; a sink may do its cheap part of the work
    /// there (`StandardErrorSink` folds repeated notices), so ask before `consume` only to learn, not as a filter.
    public func accepts(_ entry: ProxyLog) -> Bool { sink.accepts(entry) }

    public func consume(_ entry: ProxyLog) {
        guard sink.accepts(entry) else { return }
        condition.lock()
        while queue.count >= capacity {
            if overflow == .drop {
                dropped += 1
                let count = dropped
                let now = Date().timeIntervalSince1970
                let report = now - lastDropReport >= 1
                if report { lastDropReport = now }
                condition.unlock()
                if report { onDrop?(count) }
                return
            }
            condition.wait()
        }
        queue.append(entry)
        condition.broadcast()
        condition.unlock()
    }

    /// Returns once every entry queued so far has been consumed and the sink has flushed.
    public func flush() {
        condition.lock()
        while !queue.isEmpty || busy { condition.wait() }
        condition.unlock()
        sink.flush()
    }

    private func run() {
        while true {
            condition.lock()
            while queue.isEmpty { condition.wait() }
            let batch = queue
            queue.removeAll(keepingCapacity: true)
            busy = true
            condition.broadcast()  // room for producers waiting under backpressure
            condition.unlock()
            for entry in batch { sink.consume(entry) }
            condition.lock()
            busy = false
            condition.broadcast()  // a flush may be waiting for the queue to drain
            condition.unlock()
        }
    }
}
