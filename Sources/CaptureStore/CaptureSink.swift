import Foundation
import ProxyTrace
import Synchronization

/// `--capture FILE` (or `--capture postgresql://…`, the team store): every exchange record (heads, timings, TLS facts, decision, bodies up to the cap) and every
/// trace record into a capture file, written in batches (one transaction each) on a writer thread of its own. The
/// loop thread that made a record encodes it into the pending batch (`CaptureBatch`) and keeps it: the writer gets
/// bytes ready to bind, and no record is freed on another thread.
///
/// Overflow: backpressure, bounded by entries and by body bytes. A capture is the session's record: `report`'s
/// conclusions (an exception never used) would be wrong if exchanges were silently missing, so none is dropped
/// while the file takes writes. When the disk is slower than the traffic, a loop thread that finds the queue full
/// waits for the writer: the proxy slows to the disk's pace and memory stays bounded (`maxQueued` entries,
/// `maxQueuedBytes` of bodies). Another program's short lock on the file is waited out by the writer (the proxy
/// slows meanwhile, as under backpressure); when a write fails (disk full, file size limit, I/O error, a lock held
/// for a minute), the sink says so once, stops capturing and lets the proxy go on; every batch committed before stays
/// in the file.
///
/// The team store (`dropsWhenBehind`) never slows the proxy: a full queue drops the entry and counts it (said once,
/// and in the count at exit), and a destination that holds batches through an outage (`wantsRetry`) is called
/// about once a second without new entries, so it reconnects and catches up when the proxy is idle too.
public final class CaptureSink: LogSink, @unchecked Sendable {
    // @unchecked: `queue`, `encoder`, `busy` and `stopping` are touched only under `condition`; `writer` only on the
    // writer thread, and in `close()` after that thread has finished.
    private let writer: any CaptureDestination
    private let notice: @Sendable (String) -> Void
    private let condition = NSCondition()
    private var queue = CaptureBatch()
    private var encoder = CaptureEncoder()
    private var busy = false
    private var stopping = false
    private var threadDone = false
    /// Set once a write failed: nothing more is queued.
    private let failed = Atomic<Bool>(false)
    /// Entries dropped because the queue was full (only for a destination that `dropsWhenBehind`).
    private var dropped = 0
    private let drops: Bool

    /// Entries that may wait for the writer.
    static let maxQueued = 16_384
    /// Encoded bytes (bodies, heads, values) that may wait for the writer.
    static let maxQueuedBytes = 64 << 20
    /// How long the writer lets entries gather before a commit: fewer, larger commits, as each rewrites the last page
    /// of every table and index it touched, and a connection's trace records of a batch share one row.
    static let gather: TimeInterval = 0.05

    /// - Parameter notice: says a failed write, once.
    public init(writer: any CaptureDestination, notice: @escaping @Sendable (String) -> Void) {
        self.writer = writer
        self.notice = notice
        drops = writer.dropsWhenBehind
        writer.busyNotice = notice
        let thread = Thread { [self] in run() }
        thread.name = "atsproxy.capture"
        thread.start()
    }

    /// The capture file's path, or the team store's URI with its password hidden.
    public var path: String { writer.location }
    /// Entries dropped so far because the destination fell behind (the team store only).
    public var droppedEntries: Int {
        condition.lock()
        defer { condition.unlock() }
        return dropped
    }
    /// This run's id in the file (`runs.id`): a file may hold earlier runs.
    public var runID: Int64 { writer.runID }

    public func accepts(_ entry: ProxyLog) -> Bool {
        switch entry {
        case .exchange, .diagnostics: !failed.load(ordering: .relaxed)
        case .event, .notice: false
        }
    }

    public func consume(_ entry: ProxyLog) {
        let item: CaptureItem
        switch entry {
        case .exchange(let exchange): item = .exchange(exchange)
        case .diagnostics(let record): item = .trace(record, time: Date().timeIntervalSince1970)
        case .event, .notice: return
        }
        guard !failed.load(ordering: .relaxed) else { return }
        condition.lock()
        if drops, !queue.isEmpty, queue.count >= Self.maxQueued || queue.byteCount >= Self.maxQueuedBytes {
            dropped += 1
            let first = dropped == 1
            condition.unlock()
            if first {
                notice("capture \(writer.location): the database is behind; dropping entries the queue cannot hold "
                    + "(counted; the proxy goes on)")
            }
            return
        }
        // An entry larger than the whole bound still goes in when the queue is empty, alone.
        while !queue.isEmpty, queue.count >= Self.maxQueued || queue.byteCount >= Self.maxQueuedBytes,
            !failed.load(ordering: .relaxed)
        {
            condition.wait()
        }
        if !failed.load(ordering: .relaxed) {
            encoder.append(item, to: &queue)
            // Only the writer waits for entries, and only on an empty queue: one wake-up per batch, not per record.
            if queue.count == 1 { condition.broadcast() }
        }
        condition.unlock()
    }

    /// Returns once every entry queued so far is committed to the file (or dropped after a failed write).
    public func flush() {
        condition.lock()
        while !queue.isEmpty || busy { condition.wait() }
        condition.unlock()
    }

    /// Writes what is queued, ends the run in the file and closes it. Call once, after the proxy stopped.
    public func close() {
        stopWriting()
        do { try writer.close(ended: Date().timeIntervalSince1970) } catch {
            if !failed.load(ordering: .relaxed) {
                notice("\(error); the exchanges committed before stay in the capture")
            }
        }
        if dropped > 0 {
            notice("capture \(writer.location): \(dropped) entries were dropped while the database was behind")
        }
    }

    /// For a run that never started (the proxy could not listen): leaves nothing of it (`CaptureWriter.discard`).
    /// Call once, instead of `close()`.
    public func discard() {
        stopWriting()
        do { try writer.discard() } catch {
            notice("\(error); the capture may keep an empty run")
        }
    }

    /// Lets the writer thread commit what is queued and end.
    private func stopWriting() {
        condition.lock()
        stopping = true
        condition.broadcast()
        while !threadDone { condition.wait() }
        condition.unlock()
    }

    private func run() {
        // Named from the thread itself: Foundation passes a name given before `start()` no further than the object,
        // and the kernel takes 15 bytes at most. `top -H`, perf and proxybench then tell the writer from the loops.
        Thread.current.name = "capture-writer"
        var batch = CaptureBatch()
        while true {
            condition.lock()
            var retry = false
            while queue.isEmpty && !stopping {
                // Held batches (the team store in an outage): try again within a second, new entries or not.
                if !failed.load(ordering: .relaxed) && writer.wantsRetry {
                    _ = condition.wait(until: Date(timeIntervalSinceNow: 1))
                    retry = true
                    break
                }
                condition.wait()
            }
            // Let a batch gather: a commit (and its write to the log) at most every `gather`, unless the queue is
            // half full. Loop threads add entries meanwhile without waking this thread.
            if !stopping && queue.count < Self.maxQueued / 2 {
                _ = condition.wait(until: Date(timeIntervalSinceNow: Self.gather))
            }
            if queue.isEmpty && stopping && !retry {
                threadDone = true
                condition.broadcast()
                condition.unlock()
                return
            }
            // The two buffers trade places: no allocation per batch.
            swap(&queue, &batch)
            busy = true
            condition.broadcast()  // room for loop threads waiting under backpressure
            condition.unlock()
            if !failed.load(ordering: .relaxed) {
                do { try writer.write(batch) } catch {
                    failed.store(true, ordering: .relaxed)
                    notice(
                        "\(error); no more exchanges are captured (the proxy goes on; the \(writer.exchangesWritten) "
                            + "exchanges committed before stay in the file)")
                }
            }
            batch.removeAll()
            condition.lock()
            busy = false
            condition.broadcast()  // a flush, or loop threads after a failure, may be waiting
            condition.unlock()
        }
    }
}
