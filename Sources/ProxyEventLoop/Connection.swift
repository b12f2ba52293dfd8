import CLinuxShims
#if canImport(Glibc)
import Glibc
#endif

/// One TCP connection, confined to the loop that owns it.
///
/// Commands (`write`, `shutdownWrite`, `close`, `abort`, `pauseReading`, `resumeReading`, `startTimer`,
/// `cancelTimer`) must be called on `loop`'s thread, typically from inside the handler's callbacks. Events go to
/// `handler` (see ``ConnectionHandler``). The type is deliberately not Sendable: it cannot be captured by the
/// `@Sendable` closures that cross threads.
public final class Connection {
    /// The loop this connection lives on; connections opened for it should use the same loop (see `Relay`).
    public let loop: EventLoop
    public let id: ConnectionID
    /// The receiver of this connection's events. Replace it to hand the connection to another protocol layer.
    public var handler: (any ConnectionHandler)?

    private enum State {
        case connecting
        case open
        case closed
    }

    let fd: Int32
    private var state: State
    private var epollData: UInt64 = 0
    private var registeredEvents: UInt32 = 0
    private var inEpoll = false

    private var readingPaused = false
    private var readEOF = false
    private var writeShutdownRequested = false
    private var writeShutdownDone = false
    private var closeRequested = false
    /// Set by `reset()`: once the queued bytes are out, the connection ends with a TCP reset instead of a FIN.
    private var resetRequested = false
    /// After `close()`: FIN sent, unread input discarded until the peer's EOF or `lingerLimit`.
    private var lingering = false
    private var lingerTimer: TimerID?
    /// How long a closing connection waits for the peer's EOF (see `beginLinger`).
    static let lingerLimit: Duration = .seconds(2)

    private var writeQueue: [[UInt8]] = []
    private var writeQueueHead = 0
    private var headOffset = 0
    /// Bytes queued and not yet accepted by the kernel.
    public private(set) var bufferedWriteBytes = 0
    /// Set while this connection waits in its loop's list of writes to send at the end of the batch.
    private var flushHeldForBatch = false
    private var reportedNotWritable = false

    private var timers: Set<TimerID> = []
    private var connectTimer: TimerID?
    /// Inactivity bookkeeping: the idle timeout and the quiet notice (see Connection+Activity.swift).
    var idleTimeout: UInt64 = 0
    var quietAfter: UInt64 = 0
    var quietNoticed = false
    var idleTimer: TimerID?
    var lastActivity: UInt64 = 0

    /// The peer's address as accept4 reported it, for an accepted TCP connection.
    private let acceptedPeer: SocketAddress?
    /// The peer's address (from the accept, else a getpeername call; nil once closed).
    public var remoteAddress: SocketAddress? {
        state == .closed ? nil : acceptedPeer ?? Socket.peerAddress(fd)
    }
    /// The local address (a getsockname call; nil once closed).
    public var localAddress: SocketAddress? { state == .closed ? nil : Socket.localAddress(fd) }

    /// Whether the connection has been closed (its handler got or will get `connectionClosed`).
    public var isClosed: Bool { state == .closed }

    /// Whether the write buffer is below the high-water mark. Writing while not writable still works (bytes are
    /// queued) but a well-behaved producer pauses until `writabilityChanged(true)`.
    public var isWritable: Bool { bufferedWriteBytes < loop.writeLimits.highWater }

    private init(
        loop: EventLoop, fd: Int32, state: State, handler: any ConnectionHandler, acceptedPeer: SocketAddress? = nil
    ) {
        self.loop = loop
        self.acceptedPeer = acceptedPeer
        self.id = loop.makeConnectionID()
        self.fd = fd
        self.state = state
        self.handler = handler
    }

    // MARK: - Creation

    /// Adopts an accepted socket (`peer`: its address from accept4) or a local stream socket. No TCP_NODELAY here:
    /// an accepted socket inherits it from the listener (`Listener`), and a local socket has no Nagle. Loop thread only.
    static func adopt(fd: Int32, peer: SocketAddress? = nil, on loop: EventLoop, handler: any ConnectionHandler) {
        let connection = Connection(loop: loop, fd: fd, state: .open, handler: handler, acceptedPeer: peer)
        loop.connections[connection.id] = connection
        do {
            connection.epollData = try loop.register(fd, connection, events: EPOLLIN.rawValue)
            connection.registeredEvents = EPOLLIN.rawValue
            connection.inEpoll = true
        } catch {
            connection.fail(error)
            return
        }
        handler.connectionOpened(connection)
        // Handed over by the listener just before a graceful shutdown began: ask it to finish like the others.
        if loop.isDraining { connection.requestShutdown() }
    }

    /// Starts a non-blocking connect. The outcome arrives as `connectionOpened` or `connectionClosed(error:)`
    /// (ETIMEDOUT after `timeout`). Loop thread only.
    static func connect(
        to address: SocketAddress, on loop: EventLoop, timeout: Duration, handler: any ConnectionHandler
    ) -> Connection {
        loop.preconditionInEventLoop()
        let fd: Int32
        do {
            fd = try Socket.makeTCP(family: address.family)
        } catch {
            // No fd: a connection object that is already closed carries the error to the handler.
            let connection = Connection(loop: loop, fd: -1, state: .closed, handler: handler)
            loop.enqueueDeferred { connection.deliverClosed(error) }
            return connection
        }
        let connection = Connection(loop: loop, fd: fd, state: .connecting, handler: handler)
        connection.setNoDelay()
        loop.connections[connection.id] = connection
        let rc = address.withSockaddr { Glibc.connect(fd, $0, $1) }
        let code = rc == 0 ? 0 : errno
        do {
            if rc == 0 || code == EINPROGRESS || code == EINTR {
                connection.epollData = try loop.register(fd, connection, events: EPOLLOUT.rawValue)
                connection.registeredEvents = EPOLLOUT.rawValue
                connection.inEpoll = true
                // Even an immediate success is reported through EPOLLOUT, so the handler is never re-entered.
                connection.connectTimer = loop.scheduleTimer(after: timeout) { [weak connection] in
                    guard let connection, connection.state == .connecting else { return }
                    connection.fail(IOError(errnoCode: ETIMEDOUT, call: "connect"))
                }
            } else {
                connection.fail(IOError(errnoCode: code, call: "connect"))
            }
        } catch {
            connection.fail(error)
        }
        return connection
    }

    private func setNoDelay() {
        // Small request/response exchanges through a proxy must not wait for Nagle's delayed ACK dance.
        var one: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    // MARK: - Commands

    /// Queues bytes for sending; whatever the socket accepts right away is written without being copied.
    /// Bytes written after `shutdownWrite()` or `close()`, or on a closed connection, are dropped.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        loop.preconditionInEventLoop()
        guard state != .closed, !writeShutdownRequested, !closeRequested, bytes.count > 0 else { return }
        if holdsForBatch(bytes.count) {
            holdForBatch(Array(bytes))
            return
        }
        var offset = 0
        if state == .open && bufferedWriteBytes == 0 {
            switch sendSome(bytes) {
            case .failure(let error):
                fail(error)
                return
            case .success(let sent):
                offset = sent
            }
            if offset == bytes.count { return }
        }
        enqueue(Array(bytes[offset...]))
    }

    /// Queues bytes for sending.
    public func write(_ bytes: [UInt8]) {
        loop.preconditionInEventLoop()
        guard state != .closed, !writeShutdownRequested, !closeRequested, !bytes.isEmpty else { return }
        if holdsForBatch(bytes.count) {
            holdForBatch(bytes)
            return
        }
        if state == .open && bufferedWriteBytes == 0 {
            let result = bytes.withUnsafeBytes { sendSome($0) }
            switch result {
            case .failure(let error):
                fail(error)
            case .success(let sent) where sent == bytes.count:
                break
            case .success(let sent):
                enqueue(sent == 0 ? bytes : Array(bytes[sent...]))
            }
            return
        }
        enqueue(bytes)
    }

    /// Half-closes: sends FIN once every queued byte is written. Reading continues.
    public func shutdownWrite() {
        loop.preconditionInEventLoop()
        guard state != .closed, !writeShutdownRequested else { return }
        writeShutdownRequested = true
        if state == .open && bufferedWriteBytes == 0 { performWriteShutdown() }
    }

    /// Closes after every queued byte is written (for a connection still connecting: once it is established and
    /// the bytes are out). Reading stops now. `connectionClosed(error: nil)` follows.
    public func close() {
        loop.preconditionInEventLoop()
        guard state != .closed else { return }
        if bufferedWriteBytes > 0 {
            closeRequested = true
            readingPaused = true
            // Bytes held for the end of the batch: that flush sets the interest (or lingers), one epoll_ctl fewer.
            if !flushHeldForBatch { updateInterest() }
        } else {
            beginLinger()
        }
    }

    /// Closing a socket whose receive queue holds unread bytes makes the kernel send a reset, which can destroy
    /// what the peer has not read yet (the last response, a block answer sent before the request body arrived).
    /// So: FIN first, then read and discard until the peer's EOF, or `lingerLimit`, then close.
    private func beginLinger() {
        guard state != .closed else { return }
        if resetRequested {
            if fd >= 0 {
                // SO_LINGER with a zero timeout: close(2) sends RST and drops whatever the kernel still holds. Should
                // the option fail, the close below is a plain one (FIN): the best left to do on a closing socket.
                var abortive = linger(l_onoff: 1, l_linger: 0)
                _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &abortive, socklen_t(MemoryLayout<linger>.size))
            }
            finish(error: nil)
            return
        }
        if readEOF || state == .connecting || fd < 0 {
            finish(error: nil)
            return
        }
        lingering = true
        if !writeShutdownDone {
            writeShutdownDone = true
            if Glibc.shutdown(fd, Int32(SHUT_WR)) < 0 {
                finish(error: nil)
                return
            }
        }
        readingPaused = false
        updateInterest()
        lingerTimer = loop.scheduleTimer(after: Self.lingerLimit) { [weak self] in self?.finish(error: nil) }
    }

    /// Closes with a TCP reset once every queued byte is handed to the kernel: the peer sees its connection fail
    /// (ECONNRESET) rather than end. A proxy ends a client's connection so when the response it relayed was cut off,
    /// as the origin's own reset would have told that client directly. `connectionClosed(error: nil)` follows.
    public func reset() {
        loop.preconditionInEventLoop()
        guard state != .closed else { return }
        resetRequested = true
        close()
    }

    /// Closes at once, dropping queued bytes. `connectionClosed(error: nil)` follows.
    public func abort() {
        loop.preconditionInEventLoop()
        guard state != .closed else { return }
        // Bytes held for the end of the batch get the one send they would have had without batching; quietly, as
        // abort() promises: no handler callback, no error.
        if flushHeldForBatch { sendQueuedOnce() }
        finish(error: nil)
    }

    /// Stops delivering received bytes (the kernel buffer then fills and TCP flow control slows the peer).
    public func pauseReading() {
        loop.preconditionInEventLoop()
        guard !readingPaused else { return }
        readingPaused = true
        updateInterest()
    }

    /// Resumes delivering received bytes.
    public func resumeReading() {
        loop.preconditionInEventLoop()
        guard readingPaused, !closeRequested else { return }
        readingPaused = false
        if state != .closed && !inEpoll {
            // Removed after a hang-up while paused (see handleEvents); the data still in the kernel is read now.
            do {
                try loop.reAdd(fd, data: epollData, events: desiredEvents())
                registeredEvents = desiredEvents()
                inEpoll = true
            } catch {
                fail(error)
            }
            return
        }
        updateInterest()
    }

    /// Whether reading is paused.
    public var isReadingPaused: Bool { readingPaused }

    /// Starts a timer; `connection(_:timerFired:)` follows unless cancelled or the connection closes first.
    @discardableResult
    public func startTimer(after delay: Duration) -> TimerID {
        loop.preconditionInEventLoop()
        let timer = loop.scheduleTimer(after: delay) { [weak self] (fired: TimerID) in
            guard let self, self.state != .closed, self.timers.remove(fired) != nil else { return }
            self.handler?.connection(self, timerFired: fired)
        }
        timers.insert(timer)
        return timer
    }

    /// Cancels a timer started with `startTimer(after:)`.
    public func cancelTimer(_ timer: TimerID) {
        if timers.remove(timer) != nil { loop.cancelTimer(timer) }
    }

    func requestShutdown() {
        guard state != .closed else { return }
        handler?.connectionShutdownRequested(self)
    }

    // MARK: - Write machinery

    /// Writes smaller than this wait for the end of the loop's batch (see the loop's theory of operation); larger
    /// ones are bulk transfers, which gain nothing from waiting and would cost a copy.
    static let batchedWriteLimit = 16 * 1024

    private func holdsForBatch(_ count: Int) -> Bool {
        loop.isBatchingWrites && state == .open && count < Self.batchedWriteLimit
    }

    private func holdForBatch(_ bytes: [UInt8]) {
        append(bytes)
        if !flushHeldForBatch {
            flushHeldForBatch = true
            loop.flushAtEndOfBatch(self)
        }
    }

    /// Offers the queued bytes to the socket once, in order, stopping at the first short or failed send; calls no
    /// handler and changes no state but the queue's (for `abort()`).
    private func sendQueuedOnce() {
        for index in writeQueueHead..<writeQueue.count {
            let chunk = writeQueue[index]
            let offset = index == writeQueueHead ? headOffset : 0
            let result = chunk.withUnsafeBytes { sendSome(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            guard case .success(let sent) = result, sent == chunk.count - offset else { return }
        }
    }

    /// Sends what was held for the end of the batch. Called by the loop.
    func flushBatchedWrites() {
        flushHeldForBatch = false
        guard state == .open, bufferedWriteBytes > 0 else { return }
        flush()
    }

    private func enqueue(_ bytes: [UInt8]) {
        append(bytes)
        updateInterest()
    }

    private func append(_ bytes: [UInt8]) {
        // Coalesce small writes so that a burst of tiny responses does not become a long queue of tiny sends.
        if writeQueue.count > writeQueueHead, let last = writeQueue.last, last.count + bytes.count <= 16 * 1024,
            writeQueue.count - 1 > writeQueueHead || headOffset == 0
        {
            writeQueue[writeQueue.count - 1].append(contentsOf: bytes)
        } else {
            writeQueue.append(bytes)
        }
        bufferedWriteBytes += bytes.count
        if !reportedNotWritable && bufferedWriteBytes >= loop.writeLimits.highWater {
            reportedNotWritable = true
            loop.enqueueDeferred { [weak self] in
                guard let self, self.state != .closed, self.reportedNotWritable else { return }
                self.handler?.connection(self, writabilityChanged: false)
            }
        }
    }

    private enum SendResult {
        case success(Int)
        case failure(IOError)
    }

    private func sendSome(_ bytes: UnsafeRawBufferPointer) -> SendResult {
        do {
            let sent = try syscall("send") { clinux_send(fd, bytes.baseAddress, bytes.count) }
            if sent != nil { noteActivity() }
            return .success(sent.map { Int($0) } ?? 0)
        } catch {
            return .failure(error)
        }
    }

    /// Writes queued chunks until the queue is empty or the socket is full.
    private func flush() {
        while writeQueueHead < writeQueue.count {
            let chunk = writeQueue[writeQueueHead]
            let result = chunk.withUnsafeBytes { raw in
                sendSome(UnsafeRawBufferPointer(rebasing: raw[headOffset...]))
            }
            switch result {
            case .failure(let error):
                fail(error)
                return
            case .success(let sent):
                bufferedWriteBytes -= sent
                headOffset += sent
                if headOffset < chunk.count { break }
                writeQueue[writeQueueHead] = []
                writeQueueHead += 1
                headOffset = 0
                continue
            }
            break
        }
        if writeQueueHead == writeQueue.count {
            writeQueue.removeAll(keepingCapacity: true)
            writeQueueHead = 0
        } else if writeQueueHead > 64 {
            writeQueue.removeSubrange(0..<writeQueueHead)
            writeQueueHead = 0
        }
        if reportedNotWritable && bufferedWriteBytes <= loop.writeLimits.lowWater {
            reportedNotWritable = false
            handler?.connection(self, writabilityChanged: true)
            guard state != .closed else { return }
        }
        if bufferedWriteBytes == 0 {
            if closeRequested {
                beginLinger()
                return
            }
            if writeShutdownRequested && !writeShutdownDone { performWriteShutdown() }
        }
        if state != .closed { updateInterest() }
    }

    private func performWriteShutdown() {
        writeShutdownDone = true
        if Glibc.shutdown(fd, Int32(SHUT_WR)) < 0 {
            let code = errno
            // ENOTCONN: the peer already reset the connection; the read side will report it.
            if code != ENOTCONN {
                fail(IOError(errnoCode: code, call: "shutdown"))
                return
            }
        }
        closeIfBothSidesDone()
    }

    private func closeIfBothSidesDone() {
        if readEOF && writeShutdownDone && state != .closed {
            finish(error: nil)
        }
    }

    // MARK: - Interest

    private func desiredEvents() -> UInt32 {
        if state == .connecting { return EPOLLOUT.rawValue }
        var events: UInt32 = 0
        if !readingPaused && !readEOF { events |= EPOLLIN.rawValue }
        if bufferedWriteBytes > 0 { events |= EPOLLOUT.rawValue }
        return events
    }

    private func updateInterest() {
        guard state != .closed, inEpoll else { return }
        let desired = desiredEvents()
        guard desired != registeredEvents else { return }
        do {
            try loop.modify(fd, data: epollData, events: desired)
            registeredEvents = desired
        } catch {
            fail(error)
        }
    }

    // MARK: - Events

    private func finishConnect(_ events: UInt32) {
        // A failed connect always reports EPOLLERR (or EPOLLHUP): only then is SO_ERROR worth a system call.
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 {
            let code = Socket.pendingError(fd)
            fail(IOError(errnoCode: code != 0 ? code : ECONNREFUSED, call: "connect"))
            return
        }
        state = .open
        if let timer = connectTimer {
            loop.cancelTimer(timer)
            connectTimer = nil
        }
        handler?.connectionOpened(self)
        guard state != .closed else { return }
        if bufferedWriteBytes > 0 {
            flush()
        } else if writeShutdownRequested && !writeShutdownDone {
            performWriteShutdown()
        }
        updateInterest()
    }

    private func readOnce() {
        let buffer = loop.readBuffer
        // recv rather than read: the same bytes, without the VFS layer a read() of a file descriptor goes through.
        let n = Glibc.recv(fd, buffer.baseAddress, buffer.count, 0)
        if lingering {
            // Closing: input is discarded; EOF or an error ends the linger.
            if n > 0 { return }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return }
            finish(error: nil)
            return
        }
        if n > 0 {
            noteActivity()
            handler?.connection(self, received: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            return
        }
        if n == 0 {
            readEOF = true
            updateInterest()
            handler?.connectionReadEOF(self)
            closeIfBothSidesDone()
            return
        }
        let code = errno
        switch code {
        case EINTR, EAGAIN, EWOULDBLOCK:
            return
        case EBADF, EFAULT:
            preconditionFailure("recv failed with programmer error errno \(code)")
        default:
            fail(IOError(errnoCode: code, call: "recv"))
        }
    }

    // MARK: - Closing

    /// Closes with an error. The handler hears about it after the current callback (see `finish`).
    func fail(_ error: IOError) {
        finish(error: error)
    }

    private func finish(error: IOError?) {
        guard state != .closed else { return }
        state = .closed
        if fd >= 0 {
            // No EPOLL_CTL_DEL: closing the only descriptor of the socket takes it out of the epoll set (nothing
            // dup()s a connection's fd, and the process does not fork), and a stale event for it in the current batch
            // is dropped by its generation.
            loop.deregister(fd, removeFromEpoll: false)
            inEpoll = false
            closeDescriptor(fd)
        }
        for timer in timers { loop.cancelTimer(timer) }
        if let timer = idleTimer { loop.cancelTimer(timer) }
        timers.removeAll()
        if let timer = connectTimer { loop.cancelTimer(timer) }
        if let timer = lingerTimer { loop.cancelTimer(timer) }
        writeQueue = []
        bufferedWriteBytes = 0
        let id = self.id
        // Deferred: the handler may be in the middle of a callback that caused this close.
        loop.enqueueDeferred { [self] in
            self.deliverClosed(error)
            self.loop.connectionRemoved(id)
        }
    }

    private func deliverClosed(_ error: IOError?) {
        let handler = self.handler
        self.handler = nil
        handler?.connectionClosed(self, error: error)
    }
}

extension Connection: Selectable {
    func handleEvents(_ events: UInt32) {
        if state == .connecting {
            finishConnect(events)
            return
        }
        if events & EPOLLERR.rawValue != 0 {
            // A reset can arrive behind bytes not read yet (a TLS alert, a last request): recv returns those first and
            // then the error, so read while there is anything to deliver. SO_ERROR would clear the error and lose them.
            if events & EPOLLIN.rawValue != 0 && !readingPaused && !readEOF {
                readOnce()
                return
            }
            let code = Socket.pendingError(fd)
            fail(IOError(errnoCode: code == 0 ? ECONNRESET : code, call: "socket"))
            return
        }
        let readable = events & (EPOLLIN.rawValue | EPOLLHUP.rawValue) != 0
        if readable && !readingPaused && !readEOF {
            readOnce()
            guard state != .closed else { return }
        }
        if events & EPOLLOUT.rawValue != 0 && bufferedWriteBytes > 0 {
            flush()
            guard state != .closed else { return }
        }
        if events & EPOLLHUP.rawValue != 0 && (readingPaused || readEOF) {
            // Level-triggered EPOLLHUP is reported even with an empty interest set and would spin while we are not
            // reading. Leave the epoll set until the owner resumes reading (or closes).
            loop.removeFromEpoll(fd)
            inEpoll = false
        }
    }
}

@available(*, unavailable, message: "a Connection is confined to its loop thread")
extension Connection: Sendable {}
