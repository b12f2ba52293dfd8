#if canImport(Glibc)
import Glibc
#endif

/// Inactivity handling: the idle timeout and the quiet notice share one lazily re-armed timer per connection.
/// Activity only stores a timestamp, so a busy connection costs no timer operation per read or write: the timer
/// fires at the earliest deadline that could be due and, finding activity since, re-arms for the rest.
extension Connection {
    /// Closes the connection with `IOError(ETIMEDOUT, "idle timeout")` when neither a read nor a write made progress
    /// for `timeout`. `nil` switches it off. Loop thread only.
    public func setIdleTimeout(_ timeout: Duration?) {
        loop.preconditionInEventLoop()
        idleTimeout = timeout.map { max(1, $0.nanoseconds) } ?? 0
        restartActivityTimer()
    }

    /// Calls the handler's `connectionBecameQuiet` once the connection has made no progress for `delay`, and again
    /// after each later burst of activity: the moment to give back buffers that only traffic needs. `nil` switches it
    /// off. Loop thread only.
    public func setQuietNotice(after delay: Duration?) {
        loop.preconditionInEventLoop()
        quietAfter = delay.map { max(1, $0.nanoseconds) } ?? 0
        quietNoticed = false
        restartActivityTimer()
    }

    /// Records progress on the socket. Called by the read and send paths. Stamped with the loop's batch time, not
    /// the clock: a deadline then counts from at most one batch earlier (microseconds, a few milliseconds when a batch
    /// signs leaves), one clock read per batch instead of one per read and send.
    @inline(__always)
    func noteActivity() {
        guard idleTimeout > 0 || quietAfter > 0 else { return }
        lastActivity = loop.batchStartTime
        if quietNoticed {
            // Active again after a quiet notice: the pending timer may be as far away as the idle timeout, so the next
            // quiet period needs its own deadline. One timer operation per quiet-to-busy transition.
            quietNoticed = false
            armActivityTimer(after: quietAfter)
        }
    }

    private func restartActivityTimer() {
        guard !isClosed, idleTimeout > 0 || quietAfter > 0 else {
            cancelActivityTimer()
            return
        }
        lastActivity = monotonicNanoseconds()
        armActivityTimer(after: nextActivityDeadline(idleFor: 0))
    }

    /// Nanoseconds until the next deadline that could be due, given `idle` nanoseconds without activity.
    private func nextActivityDeadline(idleFor idle: UInt64) -> UInt64 {
        var delay = UInt64.max
        if idleTimeout > 0 { delay = idleTimeout &- min(idle, idleTimeout) }
        if quietAfter > 0, !quietNoticed { delay = min(delay, quietAfter &- min(idle, quietAfter)) }
        return max(1, delay)
    }

    private func armActivityTimer(after nanoseconds: UInt64) {
        cancelActivityTimer()
        idleTimer = loop.scheduleTimer(after: .nanoseconds(Int64(clamping: nanoseconds))) { [weak self] in
            self?.activityTimerFired()
        }
    }

    private func cancelActivityTimer() {
        if let timer = idleTimer {
            loop.cancelTimer(timer)
            idleTimer = nil
        }
    }

    private func activityTimerFired() {
        idleTimer = nil
        guard !isClosed else { return }
        let idle = monotonicNanoseconds() &- lastActivity
        if idleTimeout > 0, idle >= idleTimeout {
            fail(IOError(errnoCode: ETIMEDOUT, call: "idle timeout"))
            return
        }
        if quietAfter > 0, !quietNoticed, idle >= quietAfter {
            quietNoticed = true
            handler?.connectionBecameQuiet(self)
            loop.trimHeapSoon()  // after the handler gave its buffers back
            guard !isClosed else { return }
        }
        if idleTimeout > 0 || (quietAfter > 0 && !quietNoticed) {
            armActivityTimer(after: nextActivityDeadline(idleFor: idle))
        }
    }
}
