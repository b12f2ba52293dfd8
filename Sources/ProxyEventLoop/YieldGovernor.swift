/// Decides whether an event loop may yield the CPU and poll before it sleeps (`EventLoop.pollYielding`), from how long
/// its recent yields took. Pure: the loop hands in the durations and the time.
///
/// Yielding pays when the threads that share the cores are the proxy's own peers (a client and an origin on the same
/// machine): the peer runs at once and produces the next event. It costs when something CPU-bound shares them (a
/// build on a developer's machine): a yield then hands that task a whole scheduler slice, milliseconds during which
/// this loop's ready events wait, where a loop asleep in `epoll_wait` is woken and runs almost at once. Measured on
/// the 2-core benchmark machine: with only the peers, under 0.3% of yields took 2 ms or more (none 4 ms); with two
/// busy loops beside them, 8% to 49% did, and yielding cost 16% of the requests/s. So a few long yields in a short
/// window suspend yielding for a while, after which it is tried again.
struct YieldGovernor {
    /// A yield that took at least this long lost the CPU to something that is not a quick peer.
    static let longYieldNanoseconds: UInt64 = 2_000_000
    /// How many yields one window counts.
    static let window = 64
    /// Long yields in one window that suspend yielding.
    static let longYieldsToSuspend = 4
    /// How long yielding stays suspended.
    static let suspension: UInt64 = 1_000_000_000

    private var yieldsInWindow = 0
    private var longYieldsInWindow = 0
    private var suspendedUntil: UInt64 = 0

    /// Whether the loop may yield at monotonic time `now`.
    func allowsYielding(at now: UInt64) -> Bool {
        now >= suspendedUntil
    }

    /// Records a yield that took `duration`, ending at `now`.
    mutating func recordYield(duration: UInt64, endingAt now: UInt64) {
        yieldsInWindow += 1
        if duration >= Self.longYieldNanoseconds {
            longYieldsInWindow += 1
            if longYieldsInWindow >= Self.longYieldsToSuspend {
                suspendedUntil = now &+ Self.suspension
                yieldsInWindow = 0
                longYieldsInWindow = 0
                return
            }
        }
        if yieldsInWindow >= Self.window {
            yieldsInWindow = 0
            longYieldsInWindow = 0
        }
    }
}
