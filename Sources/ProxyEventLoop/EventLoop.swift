// Theory of operation
//
// 1. One EventLoop = one thread, one epoll fd, one eventfd. Everything registered on a loop (connections, listeners,
//    timers) is touched only by that thread; public methods that may be called from elsewhere say so.
// 2. Level-triggered epoll. A paused reader simply drops EPOLLIN from its interest set, and each ready connection
//    gets one read per wake-up, which keeps loops fair without draining every socket until EAGAIN as edge-triggered
//    mode would require. EPOLLOUT is in the interest set only while a write buffer is non-empty.
// 3. The 64-bit epoll user data packs (generation << 32 | fd). A registration table indexed by fd holds the
//    generation of the current owner, so an event queued for a closed fd that was reused in the same epoll_wait
//    batch is recognised as stale and dropped (the ABA problem SwiftNIO's SelectorEpoll guards against).
// 4. Timers live in a min-heap; the next deadline becomes the epoll_wait timeout (no timerfd needed: one fd fewer
//    per loop and no syscall to re-arm).
// 5. Other threads hand work in through `execute`: a mutex-protected task list plus an eventfd write that wakes
//    epoll_wait. Writes to the eventfd are skipped when a wake-up is already pending.
// 6. Notifications caused by a handler's own command (e.g. `closed` after `close()`) are queued as "deferred" work and
//    run after the current callback returns, so handlers are never re-entered.
// 7. Small writes made while the loop handles an epoll_wait batch are held in their connections' queues and sent when
//    the batch ends, after every ready socket has been read. Each send to a loopback or LAN peer wakes the peer's
//    thread; sent one by one between reads, they wake it again and again (and the woken peer preempts this thread),
//    where sent together they wake it once. Measured with 32 keep-alive connections through the proxy, in six
//    interleaved A/B runs: 1% to 13% less proxy CPU per request (median 9%), and fewer involuntary context switches
//    in the proxy and in its peers. No write waits much more than `maximumWriteHold`: a batch that runs longer
//    (handshakes, a leaf to sign) sends what it holds as it goes.
// 8. After a batch of two or more events the loop yields the CPU and polls a few times before it sleeps
//    (`pollYielding`): under load the next event usually comes from a peer that runs meanwhile, and a thread asleep
//    in epoll_wait costs that peer a wake-up (an interrupt to the other core, on a VM an exit to the hypervisor).
//    When yields start taking milliseconds, a CPU-bound task is getting the core instead, and `YieldGovernor`
//    suspends yielding for a second.
// 9. A connection's fd is closed without EPOLL_CTL_DEL: closing the last descriptor of a socket takes it out of every
//    epoll set, and item 3 drops an event already queued for it. This holds only while nothing else keeps the socket
//    open: the proxy never dup()s a loop's fd, never passes one over SCM_RIGHTS and never forks (a child spawned by a
//    test holds the CLOEXEC fds only until its exec, so at worst a closed fd reports a few stale events until then).
// 10. Every loop accepts from each listening socket itself (`Listener`, `EPOLLEXCLUSIVE`); `tearDown` still runs the
//    tasks submitted before the queue closed, since a submit that returned true may carry an accepted fd.

import CLinuxShims
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Something registered on the loop's epoll set.
protocol Selectable: AnyObject {
    func handleEvents(_ events: UInt32)
}

/// One event-loop thread with its epoll set, wake-up eventfd, timers and connections.
///
/// Thread-safety: `execute(_:)`, `inEventLoop`, `index` and `group` may be used from any thread. Everything else must
/// be called on the loop's own thread (checked by `preconditionInEventLoop()` in debug builds).
public final class EventLoop: @unchecked Sendable {
    // @unchecked Sendable: all mutable state below is confined to the loop thread, except `tasks` (a lock) and
    // `threadID` (an Atomic); the public entry points that other threads may use touch only those.

    /// The position of this loop in its group.
    public let index: Int
    /// Write buffer limits given to every connection on this loop.
    public let writeLimits: WriteBufferLimits

    let epollFD: Int32
    let wakeFD: Int32
    private let threadID = Atomic<UInt>(0)
    private struct TaskQueue {
        var list: [@Sendable () -> Void] = []
        var wakePending = false
        /// Set when the loop has exited: its eventfd is closed (and the number may be reused), so nothing may be
        /// written to it any more.
        var closed = false
    }
    private let tasks = Locked(TaskQueue())

    /// One read buffer shared by every connection on this loop (reads are processed one at a time).
    let readBuffer: UnsafeMutableRawBufferPointer

    private struct Slot {
        var generation: UInt32 = 0
        var object: (any Selectable)?
    }
    private var slots: [Slot] = []
    private var nextGeneration: UInt32 = 1

    private var timerHeap = TimerHeap()
    private var timerCallbacks: [UInt64: () -> Void] = [:]
    private var nextTimerID: UInt64 = 1

    private var deferred: [() -> Void] = []
    private var stopRequested = false
    /// True while the loop handles one epoll_wait batch: writes then wait in their connections' queues and go out
    /// together when the batch ends.
    private(set) var isBatchingWrites = false
    /// Connections with writes held for the end of the batch, in the order they were written.
    private var connectionsToFlush: [Connection] = []
    /// The list being flushed; swapped with `connectionsToFlush` so that neither array is allocated afresh per batch
    /// (a keep-alive load ends a batch every few requests).
    private var connectionsFlushing: [Connection] = []
    /// When the oldest held write must go out even if the batch is still running (monotonic nanoseconds).
    private var heldWritesDeadline: UInt64 = 0
    /// How long a write may be held for the end of its batch.
    static let maximumWriteHold: UInt64 = 1_000_000
    /// When the current iteration's `epoll_wait` returned (monotonic nanoseconds). Connections stamp their activity
    /// with it (Connection+Activity) instead of reading the clock on every read and send, four times per keep-alive
    /// request; their idle and quiet deadlines, seconds and a quarter second long, do not need the batch's
    /// microseconds.
    private(set) var batchStartTime = monotonicNanoseconds()

    var connections: [ConnectionID: Connection] = [:] {
        didSet { openConnections.store(connections.count, ordering: .relaxed) }
    }
    /// `connections.count`, readable from any thread: listeners balance accepted connections by it (`Acceptor`).
    let openConnections = Atomic<Int>(0)
    /// Accepted connections handed to this loop by another loop's acceptor and not adopted yet.
    let incomingConnections = Atomic<Int>(0)
    /// The connections this loop has or is about to have; from any thread, a moment's snapshot.
    var acceptLoad: Int {
        openConnections.load(ordering: .relaxed) + incomingConnections.load(ordering: .relaxed)
    }
    private var nextConnectionSerial: UInt64 = 0
    /// Listeners and UDP sockets on this loop, kept until they close (BoundSocket).
    var boundSockets: [ObjectIdentifier: any BoundSocket] = [:]
    private var pendingResolutions: [UInt64: (Result<[SocketAddress], ResolveError>) -> Void] = [:]
    private var nextResolutionID: UInt64 = 0
    private(set) var isDraining = false
    private var onDrained: (@Sendable () -> Void)?

    /// See `EventLoopGroup.Configuration.yieldsBeforeSleeping`.
    private let yieldsBeforeSleeping: Int
    /// Suspends yielding while something CPU-bound shares the cores.
    private var yieldGovernor = YieldGovernor()
    /// Whether a heap trim is scheduled on this loop (`trimHeapSoon`).
    private var heapTrimScheduled = false

    init(
        index: Int, writeLimits: WriteBufferLimits, readBufferSize: Int, yieldsBeforeSleeping: Int
    ) throws(IOError) {
        self.index = index
        self.writeLimits = writeLimits
        self.yieldsBeforeSleeping = yieldsBeforeSleeping
        guard let epfd = try syscall("epoll_create1", { epoll_create1(Int32(EPOLL_CLOEXEC)) }) else {
            throw IOError(errnoCode: EAGAIN, call: "epoll_create1")
        }
        let efd: Int32?
        do {
            efd = try syscall("eventfd", { eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK)) })
        } catch {
            closeDescriptor(epfd)
            throw error
        }
        guard let efd else {
            closeDescriptor(epfd)
            throw IOError(errnoCode: EAGAIN, call: "eventfd")
        }
        epollFD = epfd
        wakeFD = efd
        readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: readBufferSize, alignment: 16)
        // Generation 0 is reserved for the wake-up eventfd.
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = UInt64(UInt32(bitPattern: efd))
        if epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &event) < 0 {
            let code = errno
            closeDescriptor(efd)
            closeDescriptor(epfd)
            readBuffer.deallocate()
            throw IOError(errnoCode: code, call: "epoll_ctl")
        }
    }

    deinit {
        readBuffer.deallocate()
    }

    // MARK: - Thread confinement

    /// Whether the caller runs on this loop's thread.
    public var inEventLoop: Bool {
        threadID.load(ordering: .relaxed) == UInt(pthread_self())
    }

    /// Stops the program in debug builds when called off the loop thread (the compiler cannot see loop confinement).
    @inline(__always)
    public func preconditionInEventLoop(_ file: StaticString = #fileID, _ line: UInt = #line) {
        assert(inEventLoop, "called off its event loop thread", file: file, line: line)
    }

    // MARK: - Cross-thread submission

    /// Runs `task` on the loop thread, soon. Safe from any thread, including the loop itself.
    /// Tasks submitted after the loop has stopped are dropped.
    public func execute(_ task: @escaping @Sendable () -> Void) {
        _ = submit(task)
    }

    /// Like `execute`, but says whether the task was accepted (false once the loop has stopped).
    func submit(_ task: @escaping @Sendable () -> Void) -> Bool {
        let (accepted, needsWake) = tasks.withLock { state -> (Bool, Bool) in
            if state.closed { return (false, false) }
            state.list.append(task)
            if state.wakePending { return (true, false) }
            state.wakePending = true
            return (true, true)
        }
        if needsWake {
            var one: UInt64 = 1
            // EAGAIN means the counter is already non-zero, so the loop will wake anyway.
            _ = Glibc.write(wakeFD, &one, 8)
        }
        return accepted
    }

    private func runSubmittedTasks() {
        var value: UInt64 = 0
        _ = Glibc.read(wakeFD, &value, 8)
        runTasks(closingQueue: false)
    }

    /// Takes the submitted tasks (and, when `closingQueue`, refuses any later submit) and runs them in order.
    private func runTasks(closingQueue: Bool) {
        let batch = tasks.withLock { state -> [@Sendable () -> Void] in
            state.wakePending = false
            if closingQueue { state.closed = true }
            let list = state.list
            state.list = []
            return list
        }
        for task in batch {
            task()
            runDeferred()
        }
    }

    /// Asks for `connection`'s held writes to be sent when the current batch ends.
    func flushAtEndOfBatch(_ connection: Connection) {
        if connectionsToFlush.isEmpty { heldWritesDeadline = monotonicNanoseconds() &+ Self.maximumWriteHold }
        connectionsToFlush.append(connection)
    }

    private func flushBatchedWrites() {
        guard !connectionsToFlush.isEmpty else { return }
        // A flush may hold new writes (a handler writing from its callback): they go to the emptied list.
        swap(&connectionsToFlush, &connectionsFlushing)
        for index in connectionsFlushing.indices { connectionsFlushing[index].flushBatchedWrites() }
        connectionsFlushing.removeAll(keepingCapacity: true)
        runDeferred()
    }

    /// Queues work to run on this thread after the current callback returns.
    func enqueueDeferred(_ work: @escaping () -> Void) {
        deferred.append(work)
    }

    private func runDeferred() {
        while !deferred.isEmpty {
            let batch = deferred
            deferred = []
            for work in batch { work() }
        }
    }

    // MARK: - Timers

    /// Runs `body` on this loop after `delay`. Timers with equal deadlines fire in scheduling order. Loop thread only.
    @discardableResult
    public func scheduleTimer(after delay: Duration, _ body: @escaping () -> Void) -> TimerID {
        scheduleTimer(after: delay) { (_: TimerID) in body() }
    }

    /// Like `scheduleTimer(after:_:)`, passing the timer's own id to the callback.
    func scheduleTimer(after delay: Duration, _ body: @escaping (TimerID) -> Void) -> TimerID {
        preconditionInEventLoop()
        let id = TimerID(raw: nextTimerID)
        nextTimerID += 1
        timerHeap.push(.init(deadline: monotonicNanoseconds() &+ delay.nanoseconds, id: id.raw))
        timerCallbacks[id.raw] = { body(id) }
        return id
    }

    /// Cancels a timer that has not fired yet; cancelling a fired or unknown timer does nothing. Loop thread only.
    public func cancelTimer(_ timer: TimerID) {
        preconditionInEventLoop()
        timerCallbacks[timer.raw] = nil
    }

    /// A connection went quiet and gave its buffers back: trim the heap within `HeapTuning.trimDelay`, once for
    /// all the notices until then (at most five trims a second while connections keep going quiet). Loop thread only.
    func trimHeapSoon() {
        guard !heapTrimScheduled, HeapTuning.trimsAfterQuiet.load(ordering: .relaxed) else { return }
        heapTrimScheduled = true
        _ = scheduleTimer(after: HeapTuning.trimDelay) { [weak self] in
            self?.heapTrimScheduled = false
            HeapTuning.releaseFreePages()
        }
    }

    private func runDueTimers() {
        let now = monotonicNanoseconds()
        while let top = timerHeap.first, top.deadline <= now {
            _ = timerHeap.pop()
            if let callback = timerCallbacks.removeValue(forKey: top.id) {
                callback()
                runDeferred()
            }
        }
    }

    private func nextTimeoutMillis() -> Int32 {
        if !deferred.isEmpty { return 0 }
        while let top = timerHeap.first, timerCallbacks[top.id] == nil { _ = timerHeap.pop() }
        guard let top = timerHeap.first else { return -1 }
        let now = monotonicNanoseconds()
        if top.deadline <= now { return 0 }
        // Round up so that we never wake before the deadline and spin.
        let millis = (top.deadline - now + 999_999) / 1_000_000
        return Int32(min(millis, UInt64(Int32.max)))
    }

    // MARK: - Registration

    /// Registers `fd` for `events`; returns the user-data word to use for later modifications.
    func register(_ fd: Int32, _ object: any Selectable, events: UInt32) throws(IOError) -> UInt64 {
        preconditionInEventLoop()
        let index = Int(fd)
        if index >= slots.count { slots.append(contentsOf: repeatElement(Slot(), count: index + 1 - slots.count)) }
        let generation = nextGeneration
        nextGeneration = nextGeneration == UInt32.max ? 1 : nextGeneration + 1
        let data = UInt64(generation) << 32 | UInt64(UInt32(bitPattern: fd))
        var event = epoll_event()
        event.events = events
        event.data.u64 = data
        _ = try syscall("epoll_ctl") { epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) }
        slots[index] = Slot(generation: generation, object: object)
        return data
    }

    func modify(_ fd: Int32, data: UInt64, events: UInt32) throws(IOError) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = data
        _ = try syscall("epoll_ctl") { epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event) }
    }

    /// Removes `fd` from the epoll set (if it is there) and forgets its owner. Call before closing the fd.
    func deregister(_ fd: Int32, removeFromEpoll: Bool = true) {
        if removeFromEpoll {
            var event = epoll_event()
            _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &event)
        }
        if Int(fd) < slots.count { slots[Int(fd)] = Slot() }
    }

    /// Takes `fd` out of the epoll set but keeps its owner and generation, so `reAdd` can put it back.
    func removeFromEpoll(_ fd: Int32) {
        var event = epoll_event()
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, &event)
    }

    /// Re-adds an fd that was removed from the epoll set but still belongs to the same owner (same generation).
    func reAdd(_ fd: Int32, data: UInt64, events: UInt32) throws(IOError) {
        var event = epoll_event()
        event.events = events
        event.data.u64 = data
        _ = try syscall("epoll_ctl") { epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) }
    }

    func makeConnectionID() -> ConnectionID {
        nextConnectionSerial += 1
        return ConnectionID(loopIndex: index, serial: nextConnectionSerial)
    }

    // MARK: - Name resolution bookkeeping (see EventLoop+Resolve.swift)

    func storeResolution(_ completion: @escaping (Result<[SocketAddress], ResolveError>) -> Void) -> UInt64 {
        nextResolutionID += 1
        pendingResolutions[nextResolutionID] = completion
        return nextResolutionID
    }

    func completeResolution(_ id: UInt64, _ result: Result<[SocketAddress], ResolveError>) {
        pendingResolutions.removeValue(forKey: id)?(result)
    }

    // MARK: - Running

    /// The loop body, run on the loop's dedicated thread until `stop()`.
    func run() {
        threadID.store(UInt(pthread_self()), ordering: .relaxed)
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        defer { events.deallocate() }
        var lastBatch: Int32 = 0
        while !stopRequested {
            let timeout = nextTimeoutMillis()
            var count: Int32 = 0
            if lastBatch >= 2 && timeout != 0 { count = pollYielding(events, capacity: capacity) }
            if count == 0 { count = epoll_wait(epollFD, events, Int32(capacity), timeout) }
            batchStartTime = monotonicNanoseconds()
            lastBatch = count
            if count < 0 {
                let code = errno
                // EINTR: a signal arrived; simply go round again. Anything else means the epoll fd is broken.
                precondition(code == EINTR, "epoll_wait failed with errno \(code)")
                continue
            }
            isBatchingWrites = true
            for i in 0..<Int(count) {
                let data = events[i].data.u64
                let fd = Int32(bitPattern: UInt32(truncatingIfNeeded: data))
                let generation = UInt32(truncatingIfNeeded: data >> 32)
                if generation == 0 {
                    if fd == wakeFD { runSubmittedTasks() }
                    continue
                }
                let index = Int(fd)
                guard index < slots.count, slots[index].generation == generation, let object = slots[index].object
                else { continue }  // stale event for a closed (maybe reused) fd
                object.handleEvents(events[i].events)
                runDeferred()
                if !connectionsToFlush.isEmpty && monotonicNanoseconds() >= heldWritesDeadline { flushBatchedWrites() }
            }
            isBatchingWrites = false
            flushBatchedWrites()
            runDueTimers()
            runDeferred()
        }
        tearDown()
    }

    /// Gives the CPU to whatever else is runnable on this core, then looks for events without blocking, up to
    /// `yieldsBeforeSleeping` times; returns the first non-zero `epoll_wait` result, or 0.
    ///
    /// Why: when the proxy shares its cores with its peers (a client and an origin on the same machine, as on a
    /// developer's laptop or the benchmark), the next event is usually produced by a peer that runs while this
    /// thread yields. Sleeping instead makes that peer's send pay for waking this thread (a cross-core interrupt,
    /// on a VM an exit to the hypervisor) and leaves a core idle in between. Only a batch of two or more events
    /// leads here: one client's request-response ping-pong, or an idle proxy, goes straight to sleep. While yields
    /// take long (a CPU-bound task shares the cores and gets whole slices), `yieldGovernor` suspends them.
    private func pollYielding(_ events: UnsafeMutablePointer<epoll_event>, capacity: Int) -> Int32 {
        var before = monotonicNanoseconds()
        guard yieldGovernor.allowsYielding(at: before) else { return 0 }
        for _ in 0..<yieldsBeforeSleeping {
            sched_yield()
            let after = monotonicNanoseconds()
            yieldGovernor.recordYield(duration: after &- before, endingAt: after)
            let count = epoll_wait(epollFD, events, Int32(capacity), 0)
            if count != 0 || !yieldGovernor.allowsYielding(at: after) { return count }
            before = monotonicNanoseconds()
        }
        return 0
    }

    /// Closes everything still open on this loop. Runs on the loop thread as it exits.
    private func tearDown() {
        // Tasks submitted before the queue closed still run (a submit that returned true is a promise: an accepted
        // fd handed over by another loop's acceptor, an acceptor's start or close); what they open is closed below.
        runTasks(closingQueue: true)
        for socket in Array(boundSockets.values) { socket.closeOnLoop() }
        // In the order they were made, so a proxy's client connection closes before the upstream connection it
        // opened, and its exchange in flight is logged as cut off by the shutdown, not by the upstream's close.
        for connection in connections.values.sorted(by: { $0.id.serial < $1.id.serial }) { connection.abort() }
        runDeferred()
        timerCallbacks.removeAll()
        pendingResolutions.removeAll()
        deregister(wakeFD)
        closeDescriptor(wakeFD)
        closeDescriptor(epollFD)
        signalDrainedIfNeeded()
    }

    /// Asks the loop to exit after the current iteration. Called on the loop thread (through `execute`).
    func stop() {
        stopRequested = true
    }

    // MARK: - Graceful shutdown

    /// Asks every connection to finish, and calls `drained` once none is left. Loop thread only.
    func beginDraining(_ drained: @escaping @Sendable () -> Void) {
        isDraining = true
        onDrained = drained
        for connection in Array(connections.values) {
            connection.requestShutdown()
        }
        runDeferred()
        signalDrainedIfNeeded()
    }

    func connectionRemoved(_ id: ConnectionID) {
        connections[id] = nil
        if isDraining { signalDrainedIfNeeded() }
    }

    private func signalDrainedIfNeeded() {
        if connections.isEmpty, let callback = onDrained {
            onDrained = nil
            callback()
        }
    }
}
