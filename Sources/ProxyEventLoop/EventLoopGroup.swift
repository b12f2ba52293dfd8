import CLinuxShims
import Dispatch
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A set of event loops, one thread each. Every loop accepts from the group's listeners (see `Listener`); `next()`
/// places other work round-robin.
///
/// Thread-safety: every method may be called from any thread except `shutdownGracefully`, which blocks and must not
/// run on one of the group's own loop threads.
public final class EventLoopGroup: Sendable {
    /// Tuning knobs. Defaults fit a proxy: one loop per core, 256 KiB reads, 256/64 KiB write water marks. Reads go
    /// into one buffer per loop, so its size costs nothing per connection; a download through the proxy then takes
    /// about seven reads and seven sends per MiB instead of eighteen.
    public struct Configuration: Sendable {
        public var loopCount: Int
        public var readBufferSize: Int
        public var writeLimits: WriteBufferLimits
        /// How many times a loop that has just handled two or more events gives up the CPU (`sched_yield`) and looks
        /// for new events before it sleeps in `epoll_wait`; 0 sleeps at once. See `EventLoop.pollYielding`.
        public var yieldsBeforeSleeping: Int

        /// The default for `yieldsBeforeSleeping`: about 10 µs of looking when nothing else wants the CPU. Against 0
        /// on the 2-core benchmark machine (`benchmarks/abtest.py`, 8 interleaved rounds of 32 keep-alive
        /// connections): 30% more requests/s, 19% less proxy CPU per request (README, Performance).
        public static let defaultYieldsBeforeSleeping = 12

        public init(
            loopCount: Int = EventLoopGroup.coreCount, readBufferSize: Int = 256 * 1024,
            writeLimits: WriteBufferLimits = .init(), yieldsBeforeSleeping: Int = defaultYieldsBeforeSleeping
        ) {
            self.loopCount = max(1, loopCount)
            self.readBufferSize = max(1024, readBufferSize)
            self.writeLimits = writeLimits
            self.yieldsBeforeSleeping = max(0, yieldsBeforeSleeping)
        }
    }

    /// The number of online CPUs.
    public static var coreCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// The loops, in index order.
    public let loops: [EventLoop]
    private let nextIndex = Atomic<Int>(0)
    private let finished: [DispatchSemaphore]
    private struct State {
        var listeners: [Listener] = []
        var shutDown = false
        /// Signalled when every loop has drained, or by `cutShutdownShort`, during `shutdownGracefully`.
        var shutdownWake: DispatchSemaphore?
        /// `cutShutdownShort` was called: the shutdown does not wait for the connections.
        var shutdownCut = false
    }
    private let state = Locked(State())

    /// Creates the loops and starts their threads. SIGPIPE is ignored process-wide from here on (sends also use
    /// MSG_NOSIGNAL; this covers any other write path).
    public init(configuration: Configuration = .init()) throws(IOError) {
        clinux_ignore_sigpipe()
        var loops: [EventLoop] = []
        for index in 0..<configuration.loopCount {
            do {
                loops.append(
                    try EventLoop(
                        index: index, writeLimits: configuration.writeLimits,
                        readBufferSize: configuration.readBufferSize,
                        yieldsBeforeSleeping: configuration.yieldsBeforeSleeping))
            } catch {
                // Loops created so far have no thread yet: stop them by running their (immediately ending) bodies.
                for loop in loops {
                    loop.stop()
                    loop.run()
                }
                throw error
            }
        }
        self.loops = loops
        self.finished = loops.map { _ in DispatchSemaphore(value: 0) }
        for (loop, done) in zip(loops, finished) {
            let thread = Thread {
                loop.run()
                done.signal()
            }
            thread.name = "atsproxy-loop-\(loop.index)"
            thread.start()
        }
    }

    /// Convenience: `loopCount` loops with default settings.
    public convenience init(loopCount: Int) throws(IOError) {
        try self.init(configuration: Configuration(loopCount: loopCount))
    }

    /// The next loop in round-robin order.
    public func next() -> EventLoop {
        loops[nextIndex.wrappingAdd(1, ordering: .relaxed).oldValue % loops.count]
    }

    /// Binds and listens on `host:port` (numeric IPv4/IPv6 or `localhost`; port 0 picks a free port, see
    /// `Listener.port`), with SO_REUSEADDR and the given backlog. Every loop accepts for itself (the kernel wakes one
    /// idle loop per new connection), and `makeHandler` is called on the accepting loop's thread to create each
    /// connection's handler.
    public func listen(
        host: String, port: UInt16, backlog: Int32 = 511, onDescriptorsExhausted: (@Sendable () -> Void)? = nil,
        makeHandler: @escaping @Sendable (EventLoop) -> any ConnectionHandler
    ) throws(IOError) -> Listener {
        let address = try SocketAddress(numericHost: host, port: port)
        let listener = try Listener(
            address: address, backlog: backlog, loops: loops,
            onDescriptorsExhausted: onDescriptorsExhausted, makeHandler: makeHandler)
        let accepted = state.withLock { state -> Bool in
            if state.shutDown { return false }
            state.listeners.append(listener)
            return true
        }
        guard accepted, listener.start() else {
            listener.close()
            throw IOError(errnoCode: ESHUTDOWN, call: "listen (event loop group is shut down)")
        }
        return listener
    }

    /// Stops accepting, asks every connection to finish (`connectionShutdownRequested`), waits until all are closed
    /// or `timeout` has passed, then closes whatever is left and stops the loop threads. Blocks until the threads
    /// have exited. Calling it again does nothing.
    public func shutdownGracefully(timeout: Duration) {
        precondition(!loops.contains { $0.inEventLoop }, "shutdownGracefully would deadlock on a loop thread")
        let listeners = state.withLock { state -> [Listener]? in
            if state.shutDown { return nil }
            state.shutDown = true
            let list = state.listeners
            state.listeners = []
            return list
        }
        guard let listeners else { return }
        for listener in listeners { listener.close() }
        let wake = DispatchSemaphore(value: 0)
        // Set under the lock that `cutShutdownShort` takes: a cut that came first (the second signal's handler can
        // run before the first's gets here) is seen, and one that comes later finds the semaphore.
        let cutAlready = state.withLock { state -> Bool in
            state.shutdownWake = wake
            return state.shutdownCut
        }
        let draining = Locked(loops.count)
        for loop in loops {
            loop.execute {
                loop.beginDraining {
                    let remaining = draining.withLock { count -> Int in
                        count -= 1
                        return count
                    }
                    if remaining == 0 { wake.signal() }
                }
            }
        }
        let deadline = DispatchTime.now() + .nanoseconds(Int(clamping: timeout.nanoseconds))
        if !cutAlready { _ = wake.wait(timeout: deadline) }
        for loop in loops { loop.execute { loop.stop() } }
        for done in finished { done.wait() }
    }

    /// Ends `shutdownGracefully`'s wait at once, as if its deadline had passed: the connections still open are
    /// closed now. For a second Ctrl-C. Safe from any thread; called before `shutdownGracefully`, it makes that
    /// call close the connections without waiting.
    public func cutShutdownShort() {
        let wake = state.withLock { state -> DispatchSemaphore? in
            state.shutdownCut = true
            return state.shutdownWake
        }
        wake?.signal()
    }
}
