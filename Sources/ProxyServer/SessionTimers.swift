import ProxyCore
import ProxyEventLoop

/// The deadlines a session asked its adapter to keep (`ProxyCommand.startTimer`): when each is due and the loop timer
/// that stands for it. Confined to its `ClientSide`'s loop thread.
///
/// Restarting a deadline later keeps the pending loop timer and only moves `due`; the loop timer, firing early, is
/// re-armed for the rest (`ClientSide.sessionTimerFired`), as a connection's idle timer is (Connection+Activity).
/// Why: a keep-alive connection's session restarts its response deadline on every request
/// (SessionContext+Deadlines). Cancelling and scheduling a loop timer each time cost three closure allocations, a
/// heap push and two dictionary updates per request, and every cancelled entry stayed in the loop's heap until its
/// deadline (a whole `--response-timeout` of requests). The session still sees each deadline fire once, at or
/// after the due time of its latest start.
struct SessionTimers {
    private struct Pending {
        var timer: ProxyTimer
        /// The loop timer; only it can fire for this deadline (a replaced one is cancelled).
        var loopTimer: TimerID
        /// When the loop timer fires, monotonic nanoseconds.
        var firesAt: UInt64
        /// When the deadline falls: its latest start's, monotonic nanoseconds.
        var due: UInt64
    }

    /// A few entries at a time (the handshake, head and body deadlines; one per held exchange), searched linearly.
    /// An array, not a dictionary: an idle connection keeps this storage, and a one-entry dictionary of these is
    /// three times the size (heaptrack, 1 000 idle connections: 392 against 128 bytes each).
    private var pending: [Pending] = []

    private func index(of timer: ProxyTimer) -> Int? { pending.firstIndex { $0.timer == timer } }

    /// Moves a pending deadline to `due` when its loop timer fires no later (it re-arms then); false when a loop
    /// timer must be scheduled for it (none pending, or the pending one fires too late).
    mutating func postpone(_ timer: ProxyTimer, to due: UInt64) -> Bool {
        guard let index = index(of: timer), pending[index].firesAt <= due else { return false }
        pending[index].due = due
        return true
    }

    /// Records the loop timer scheduled for `timer` (firing at `firesAt`, for a deadline due then too); returns the
    /// loop timer it replaces, to be cancelled.
    mutating func armed(_ timer: ProxyTimer, loopTimer: TimerID, firesAt: UInt64) -> TimerID? {
        let entry = Pending(timer: timer, loopTimer: loopTimer, firesAt: firesAt, due: firesAt)
        guard let index = index(of: timer) else {
            pending.append(entry)
            return nil
        }
        defer { pending[index] = entry }
        return pending[index].loopTimer
    }

    /// When `timer` is due, if it is pending.
    func due(_ timer: ProxyTimer) -> UInt64? { index(of: timer).map { pending[$0].due } }

    /// Forgets `timer`; returns its loop timer, to be cancelled unless it is the one firing.
    @discardableResult
    mutating func remove(_ timer: ProxyTimer) -> TimerID? {
        guard let index = index(of: timer) else { return nil }
        return pending.remove(at: index).loopTimer
    }

    /// Forgets every deadline; returns their loop timers, to be cancelled.
    mutating func removeAll() -> [TimerID] {
        let timers = pending.map(\.loopTimer)
        pending = []
        return timers
    }

    /// Whole nanoseconds of `duration`, zero for a negative one (the loop's own conversion is internal to it).
    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || attoseconds < 0 { return 0 }
        return UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000)
    }
}
