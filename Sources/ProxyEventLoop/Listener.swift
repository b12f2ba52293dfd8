import CLinuxShims
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A listening TCP socket, accepted from by every loop of its group: each loop has the socket in its own epoll set
/// with `EPOLLEXCLUSIVE`, so the kernel wakes one sleeping loop per new connection (a busy loop finds it on its next
/// look), and the loop that accepts a connection keeps it unless it already has clearly more connections than
/// another loop (then the connection is handed over). The handler is made by `makeHandler` on the owning loop.
///
/// Why not one accepting loop handing every other connection on: each hand-off was a cross-thread wake-up (an eventfd
/// write, a context switch). Why hand over at all: a loop that is awake takes a whole burst of connections (32
/// keep-alive clients starting at once all landed on one loop), which leaves the other core idle afterwards.
///
/// Thread-safety: `address`, `port` and `close()` may be used from any thread.
public final class Listener: Sendable {
    /// The address actually bound (with the real port when 0 was asked for).
    public let address: SocketAddress
    /// The bound port.
    public var port: UInt16 { address.port }

    private let socket: ListeningSocket
    /// One per loop of the group, in loop order.
    private let acceptors: [Acceptor]

    static let exhaustedAnswer = Array((
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 62\r\n"
            + "Connection: close\r\n\r\nATSProxy: out of file descriptors; try again when load drops.\r\n").utf8)

    init(
        address: SocketAddress, backlog: Int32, loops: [EventLoop],
        onDescriptorsExhausted: (@Sendable () -> Void)? = nil,
        makeHandler: @escaping @Sendable (EventLoop) -> any ConnectionHandler
    ) throws(IOError) {
        let fd = try Socket.makeTCP(family: address.family)
        try Socket.bind(fd, to: address)
        do {
            // Accepted sockets inherit TCP_NODELAY from the listening one: one setsockopt per listener, not per
            // connection (small exchanges through a proxy must not wait for Nagle's delayed-ACK dance).
            try Socket.setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1, "setsockopt(TCP_NODELAY)")
            _ = try syscall("listen") { Glibc.listen(fd, backlog) }
        } catch {
            closeDescriptor(fd)
            throw error
        }
        self.address = Socket.localAddress(fd) ?? address
        let socket = ListeningSocket(
            fd: fd, loops: loops, onDescriptorsExhausted: onDescriptorsExhausted, makeHandler: makeHandler)
        self.socket = socket
        acceptors = loops.map { Acceptor(loop: $0, socket: socket) }
    }

    /// Starts accepting on every loop; false when some loop has stopped (the listener is then closed).
    func start() -> Bool {
        var started = true
        for acceptor in acceptors {
            if !acceptor.loop.submit({ acceptor.start() }) { started = false }
        }
        if !started { close() }
        return started
    }

    /// Stops accepting and closes the socket. Safe from any thread; established connections are not affected.
    public func close() {
        for acceptor in acceptors {
            let loop = acceptor.loop
            if loop.inEventLoop {
                acceptor.closeOnLoop()
            } else if !loop.submit({ acceptor.closeOnLoop() }) {
                // That loop's thread has ended (its tear-down closed the acceptor if it had started): nothing else
                // touches the acceptor now, so it is closed from here.
                acceptor.closeOnLoop()
            }
        }
    }
}

/// The listening descriptor and what its acceptors share.
final class ListeningSocket: Sendable {
    let fd: Int32
    /// The loops that accept from it (all of the group's).
    let loops: [EventLoop]
    let makeHandler: @Sendable (EventLoop) -> any ConnectionHandler
    /// Called (on a loop thread) each time a reserve answered a client because descriptors ran out.
    let onDescriptorsExhausted: (@Sendable () -> Void)?
    /// Acceptors that have not closed yet: the last to close closes `fd`, so no loop can accept on a descriptor
    /// number that was closed (and maybe reused) under it.
    private let acceptorsOpen: Atomic<Int>

    init(
        fd: Int32, loops: [EventLoop], onDescriptorsExhausted: (@Sendable () -> Void)?,
        makeHandler: @escaping @Sendable (EventLoop) -> any ConnectionHandler
    ) {
        self.fd = fd
        self.loops = loops
        self.makeHandler = makeHandler
        self.onDescriptorsExhausted = onDescriptorsExhausted
        acceptorsOpen = Atomic(loops.count)
    }

    /// An acceptor has let go of `fd`; the last one closes it.
    func acceptorClosed() {
        if acceptorsOpen.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { closeDescriptor(fd) }
    }
}

/// One loop's share of a `Listener`: its registration of the listening socket, its back-off and its reserve.
final class Acceptor: BoundSocket, @unchecked Sendable {
    // @unchecked Sendable: everything but `loop` is touched only on `loop`'s thread (or after it has ended, see
    // `Listener.close`).
    let loop: EventLoop
    let socket: ListeningSocket
    private var started = false
    private var closed = false
    private var epollData: UInt64 = 0
    /// Whether accepting is suspended after running out of fds (EMFILE), to avoid a level-triggered spin.
    private var backingOff = false
    /// A descriptor held in reserve (on /dev/null): when the process runs out, it is given up for one accept, so
    /// the client waiting in the backlog is answered `503` and closed rather than left hanging; then taken again.
    private var reserve: Int32 = -1

    /// Exclusive: one sleeping loop is woken per new connection, not all of them. A kernel older than 4.5 ignores the
    /// flag (every loop is woken and one of them gets the connection); should one refuse it (EINVAL), the plain
    /// registration below does the same.
    private var events = EPOLLIN.rawValue | EPOLLEXCLUSIVE.rawValue

    init(loop: EventLoop, socket: ListeningSocket) {
        self.loop = loop
        self.socket = socket
    }

    /// Registers on the loop. Loop thread only.
    func start() {
        guard !closed, !started else { return }
        do {
            epollData = try register()
        } catch {
            closeOnLoop()
            return
        }
        started = true
        loop.boundSockets[ObjectIdentifier(self)] = self
        reserve = Self.openReserve()
    }

    private func register() throws(IOError) -> UInt64 {
        do {
            return try loop.register(socket.fd, self, events: events)
        } catch where error.errnoCode == EINVAL && events != EPOLLIN.rawValue {
            events = EPOLLIN.rawValue
            return try loop.register(socket.fd, self, events: events)
        }
    }

    /// Stops accepting on this loop; the last acceptor to stop closes the socket. Loop thread only (or once the
    /// loop's thread has ended); a second call does nothing.
    func closeOnLoop() {
        guard !closed else { return }
        closed = true
        if started {
            loop.deregister(socket.fd, removeFromEpoll: !backingOff)
            loop.boundSockets[ObjectIdentifier(self)] = nil
        }
        if reserve >= 0 { closeDescriptor(reserve) }
        reserve = -1
        socket.acceptorClosed()
    }

    private static func openReserve() -> Int32 {
        Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
    }
}

extension Acceptor {
    func handleEvents(_ events: UInt32) {
        // Accept a bounded batch per wake-up so one busy listener cannot starve the loop's connections.
        for _ in 0..<64 {
            // A handler may have closed the listener while this batch ran (the last acceptor then closed the fd).
            guard !closed else { return }
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { clinux_accept(socket.fd, $0, &length) }
            }
            if client >= 0 {
                // accept4 told us the peer: kept, so asking the connection for it later costs no getpeername.
                place(client, peer: SocketAddress(storage: storage))
                continue
            }
            let code = errno
            switch code {
            case EINTR, ECONNABORTED, EPROTO, EPERM:
                continue
            case EMFILE, ENFILE:
                answerWithReserve()
                backOff()
                return
            case ENOBUFS, ENOMEM:
                // Out of memory: the pending connection stays in the backlog and epoll would report it again at
                // once. Step out of the epoll set for a moment instead of spinning.
                backOff()
                return
            case EBADF, EFAULT:
                preconditionFailure("accept4 failed with programmer error errno \(code)")
            default:
                return  // EAGAIN: backlog empty (or another loop took the connection first).
            }
        }
    }

    /// A loop with more than this many connections more than another hands what it accepts to that other loop.
    /// Small enough to even out a burst (a difference of one client connection and its upstream), large enough that
    /// the usual jitter between busy loops does not turn into hand-offs.
    static let imbalanceAllowed = 2

    /// Adopts the accepted `client` here, or hands it to the least-loaded loop when this one has more than
    /// `imbalanceAllowed` connections more.
    private func place(_ client: Int32, peer: SocketAddress?) {
        var leastLoaded = loop
        let mine = loop.acceptLoad
        var least = mine
        for other in socket.loops where other !== loop {
            let load = other.acceptLoad
            if load < least {
                least = load
                leastLoaded = other
            }
        }
        let makeHandler = socket.makeHandler
        let target = leastLoaded
        if target === loop || mine <= least + Self.imbalanceAllowed {
            Connection.adopt(fd: client, peer: peer, on: loop, handler: makeHandler(loop))
            return
        }
        // Counted at once, so the next accepts of this burst see it; the fd travels as a plain integer and the
        // Connection is created on, and confined to, its own loop.
        target.incomingConnections.add(1, ordering: .relaxed)
        let accepted = target.submit {
            target.incomingConnections.subtract(1, ordering: .relaxed)
            Connection.adopt(fd: client, peer: peer, on: target, handler: makeHandler(target))
        }
        if !accepted {
            // That loop has stopped (shutting down): this one serves the client rather than resetting it.
            target.incomingConnections.subtract(1, ordering: .relaxed)
            Connection.adopt(fd: client, peer: peer, on: loop, handler: makeHandler(loop))
        }
    }

    /// Out of descriptors: give up the reserve for one accept, tell that client why (best effort, one send on a
    /// fresh socket whose buffer is empty) and close it, then take the reserve again.
    private func answerWithReserve() {
        guard reserve >= 0 else { return }
        closeDescriptor(reserve)
        reserve = -1
        let client = clinux_accept(socket.fd, nil, nil)
        if client >= 0 {
            _ = Listener.exhaustedAnswer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            closeDescriptor(client)
        }
        reserve = Self.openReserve()
        socket.onDescriptorsExhausted?()
    }

    private func backOff() {
        backingOff = true
        loop.removeFromEpoll(socket.fd)
        loop.scheduleTimer(after: .milliseconds(100)) { [weak self] in
            guard let self, !self.closed else { return }
            self.backingOff = false
            // Another loop's accept may have taken the descriptor this one gave up: take a reserve again now.
            if self.reserve < 0 { self.reserve = Self.openReserve() }
            do {
                try self.loop.reAdd(self.socket.fd, data: self.epollData, events: self.events)
            } catch {
                self.closeOnLoop()
            }
        }
    }
}
