import CLinuxShims
#if canImport(Glibc)
import Glibc
#endif

/// A listening TCP socket. It lives on one loop, accepts there, and hands each accepted connection to the group's
/// loops in round-robin order; the handler for it is made by `makeHandler` on the connection's own loop thread.
///
/// Thread-safety: `address`, `port` and `close()` may be used from any thread.
public final class Listener: @unchecked Sendable {
    // @unchecked Sendable: `fd`, `open` and the registration are touched only on `loop`'s thread; the rest is immutable.

    /// The address actually bound (with the real port when 0 was asked for).
    public let address: SocketAddress
    /// The bound port.
    public var port: UInt16 { address.port }

    let loop: EventLoop
    private let group: EventLoopGroup
    private let makeHandler: @Sendable (EventLoop) -> any ConnectionHandler
    private let fd: Int32
    private var open = true
    private var epollData: UInt64 = 0
    /// Whether accepting is suspended after running out of fds (EMFILE), to avoid a level-triggered spin.
    private var backingOff = false
    /// A descriptor held in reserve (on /dev/null): when the process runs out, it is given up for one accept, so
    /// the client waiting in the backlog is answered `503` and closed rather than left hanging; then taken again.
    private var reserve: Int32 = -1
    /// Called (on the loop thread) each time the reserve answered a client because descriptors ran out.
    private let onDescriptorsExhausted: (@Sendable () -> Void)?

    static let exhaustedAnswer = Array((
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 62\r\n"
            + "Connection: close\r\n\r\nATSProxy: out of file descriptors; try again when load drops.\r\n").utf8)

    init(
        address: SocketAddress, backlog: Int32, loop: EventLoop, group: EventLoopGroup,
        onDescriptorsExhausted: (@Sendable () -> Void)? = nil,
        makeHandler: @escaping @Sendable (EventLoop) -> any ConnectionHandler
    ) throws(IOError) {
        let fd = try Socket.makeTCP(family: address.family)
        try Socket.bind(fd, to: address)
        do {
            _ = try syscall("listen") { Glibc.listen(fd, backlog) }
        } catch {
            closeDescriptor(fd)
            throw error
        }
        self.fd = fd
        self.address = Socket.localAddress(fd) ?? address
        self.loop = loop
        self.group = group
        self.makeHandler = makeHandler
        self.onDescriptorsExhausted = onDescriptorsExhausted
        reserve = Listener.openReserve()
    }

    private static func openReserve() -> Int32 {
        Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    /// Registers on the loop. Loop thread only.
    func start() {
        guard open else { return }
        guard let data = registerForReading(fd) else {
            open = false
            return
        }
        epollData = data
    }

    /// Stops accepting and closes the socket. Safe from any thread; established connections are not affected.
    public func close() { closeFromAnyThread() }

    func closeOnLoop() {
        guard open else { return }
        open = false
        unregister(fd, removeFromEpoll: !backingOff)
        if reserve >= 0 { closeDescriptor(reserve) }
        reserve = -1
    }
}

extension Listener: BoundSocket {
    func handleEvents(_ events: UInt32) {
        // Accept a bounded batch per wake-up so one busy listener cannot starve the loop's connections.
        for _ in 0..<64 {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { clinux_accept(fd, $0, &length) }
            }
            if client >= 0 {
                hand(client)
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
                return  // EAGAIN: backlog empty.
            }
        }
    }

    private func hand(_ client: Int32) {
        let target = group.next()
        let makeHandler = self.makeHandler
        if target === loop {
            Connection.adopt(fd: client, on: target, handler: makeHandler(target))
        } else {
            // The fd travels as a plain integer; the Connection is created on, and confined to, its own loop.
            let accepted = target.submit {
                Connection.adopt(fd: client, on: target, handler: makeHandler(target))
            }
            if !accepted { closeDescriptor(client) }
        }
    }

    /// Out of descriptors: give up the reserve for one accept, tell that client why (best effort, one send on a
    /// fresh socket whose buffer is empty) and close it, then take the reserve again.
    private func answerWithReserve() {
        guard reserve >= 0 else { return }
        closeDescriptor(reserve)
        reserve = -1
        let client = clinux_accept(fd, nil, nil)
        if client >= 0 {
            _ = Listener.exhaustedAnswer.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            closeDescriptor(client)
        }
        reserve = Listener.openReserve()
        onDescriptorsExhausted?()
    }

    private func backOff() {
        backingOff = true
        loop.removeFromEpoll(fd)
        loop.scheduleTimer(after: .milliseconds(100)) { [weak self] in
            guard let self, self.open else { return }
            self.backingOff = false
            do {
                try self.loop.reAdd(self.fd, data: self.epollData, events: EPOLLIN.rawValue)
            } catch {
                self.closeOnLoop()
            }
        }
    }
}
