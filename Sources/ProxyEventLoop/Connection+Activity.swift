#if canImport(Glibc)
import Glibc
#endif

extension Connection {
    /// Closes the connection with `IOError(ETIMEDOUT, "idle timeout")` when neither a read nor a write made progress
    /// for `timeout`. `nil` switches it off. One timer per connection, re-armed lazily: activity only stores a
    /// timestamp, so busy connections cost no timer operations. Loop thread only.
    public func setIdleTimeout(_ timeout: Duration?) {
        loop.preconditionInEventLoop()
        if let timer = idleTimer {
            loop.cancelTimer(timer)
            idleTimer = nil
        }
        guard let timeout, !isClosed else {
            idleTimeout = 0
            return
        }
        idleTimeout = max(1, timeout.nanoseconds)
        lastActivity = monotonicNanoseconds()
        armIdleTimer(after: idleTimeout)
    }

    private func armIdleTimer(after nanoseconds: UInt64) {
        idleTimer = loop.scheduleTimer(after: .nanoseconds(Int64(clamping: nanoseconds))) { [weak self] in
            self?.idleTimerFired()
        }
    }

    private func idleTimerFired() {
        idleTimer = nil
        guard !isClosed, idleTimeout > 0 else { return }
        let idle = monotonicNanoseconds() &- lastActivity
        if idle >= idleTimeout {
            fail(IOError(errnoCode: ETIMEDOUT, call: "idle timeout"))
        } else {
            armIdleTimer(after: idleTimeout - idle)
        }
    }
}
