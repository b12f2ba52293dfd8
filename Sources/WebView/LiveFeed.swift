import Dispatch
import Foundation
import ProxyEventLoop
import ProxyTrace
import Synchronization

/// The live view's sink of the exchange record: tells the open streams that exchanges arrived, so each reads what
/// is new from the capture and sends it to its page.
///
/// Why not a queue of records: the capture already keeps every exchange with its id, which the page needs to ask
/// for details; the stream sends rows read back from it. So the feed carries no records, only a wake-up, and the
/// cost on the proxy's loop threads is one atomic exchange per exchange: a browser, however slow, can never slow
/// the proxy, and nothing queues up for it (a stream that falls behind skips ahead and the page re-syncs from the
/// API; see `WebConnection`).
///
/// Wake-ups are coalesced: the first exchange after a quiet spell schedules one, `delay` later (long enough for
/// the capture's writer to have committed the batch it is in); exchanges meanwhile add nothing. Streams also look
/// once a second on their own, which covers a batch committed after the wake-up and captures written by another
/// process (`atsproxy view` on a file a proxy is writing).
public final class LiveFeed: LogSink, @unchecked Sendable {
    // @unchecked: `subscribers` is touched only under `lock`; `scheduled` and `streams` are atomic.
    private let lock = NSLock()
    private var subscribers: [ObjectIdentifier: Subscriber] = [:]
    private let scheduled = Atomic<Bool>(false)
    /// Open streams, read without the lock on the loop threads.
    private let streams = Atomic<Int>(0)
    private let delay: DispatchTimeInterval

    private struct Subscriber {
        weak var connection: WebConnection?
        let loop: EventLoop
    }

    public init(delay: DispatchTimeInterval = .milliseconds(100)) {
        self.delay = delay
    }

    public func accepts(_ entry: ProxyLog) -> Bool {
        if case .exchange = entry { true } else { false }
    }

    public func consume(_ entry: ProxyLog) {
        guard case .exchange = entry else { return }
        // Loads first: while a wake-up is pending (most of the time under load) no loop thread writes the shared
        // flag, so the loop threads do not pass its cache line back and forth; with no stream open, nothing at all.
        guard streams.load(ordering: .relaxed) > 0, !scheduled.load(ordering: .relaxed),
            !scheduled.exchange(true, ordering: .acquiringAndReleasing)
        else { return }
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + delay) { [self] in
            scheduled.store(false, ordering: .releasing)
            wakeAll()
        }
    }

    public func flush() {}

    /// The number of open streams.
    public var subscriberCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return subscribers.count
    }

    func subscribe(_ connection: WebConnection) {
        lock.lock()
        defer { lock.unlock() }
        subscribers[ObjectIdentifier(connection)] = Subscriber(
            connection: connection, loop: connection.loop)
        streams.store(subscribers.count, ordering: .relaxed)
    }

    func unsubscribe(_ connection: WebConnection) {
        lock.lock()
        defer { lock.unlock() }
        subscribers[ObjectIdentifier(connection)] = nil
        streams.store(subscribers.count, ordering: .relaxed)
    }

    /// The held exchanges changed (a hold, a release, a removal): every open stream tells its page at once
    /// (`event: held`), and the page reads `/api/held`. Called by the hold registry's observer, on any thread.
    public func holdsChanged() {
        lock.lock()
        let all = Array(subscribers.values)
        lock.unlock()
        for subscriber in all {
            guard let connection = subscriber.connection else { continue }
            let bound = LoopBound(connection)
            subscriber.loop.execute { bound.value.heldChanged() }
        }
    }

    private func wakeAll() {
        lock.lock()
        let all = Array(subscribers.values)
        lock.unlock()
        for subscriber in all {
            guard let connection = subscriber.connection else { continue }
            let bound = LoopBound(connection)
            subscriber.loop.execute { bound.value.streamMayHaveNews() }
        }
    }
}
