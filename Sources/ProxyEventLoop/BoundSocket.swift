import CLinuxShims
#if canImport(Glibc)
import Glibc
#endif

/// A socket a loop owns from `start` until it closes, read when readable: a listener, or a UDP socket. The loop
/// keeps it (`boundSockets`) and closes what is left when it ends.
protocol BoundSocket: Selectable, Sendable {
    var loop: EventLoop { get }
    /// Stops reading and closes the socket. Loop thread only; a second call does nothing.
    func closeOnLoop()
}

extension BoundSocket {
    /// Registers `fd` for reading and keeps the socket with the loop; on failure closes `fd` and returns nil. Loop
    /// thread only.
    func registerForReading(_ fd: Int32) -> UInt64? {
        do {
            let data = try loop.register(fd, self, events: EPOLLIN.rawValue)
            loop.boundSockets[ObjectIdentifier(self)] = self
            return data
        } catch {
            closeDescriptor(fd)
            return nil
        }
    }

    /// Takes `fd` off the loop (out of the epoll set unless it is out already) and closes it. Loop thread only.
    func unregister(_ fd: Int32, removeFromEpoll: Bool = true) {
        loop.deregister(fd, removeFromEpoll: removeFromEpoll)
        closeDescriptor(fd)
        loop.boundSockets[ObjectIdentifier(self)] = nil
    }

    /// `closeOnLoop`, from any thread.
    func closeFromAnyThread() {
        if loop.inEventLoop { closeOnLoop() } else { loop.execute { self.closeOnLoop() } }
    }
}

extension Socket {
    /// Binds `fd` to `address` with SO_REUSEADDR (and IPv6 only for an IPv6 address: dual-stack would silently also
    /// take IPv4); closes `fd` when that fails.
    static func bind(_ fd: Int32, to address: SocketAddress) throws(IOError) {
        do {
            try setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1, "setsockopt(SO_REUSEADDR)")
            if address.family == AF_INET6 {
                try setOption(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, 1, "setsockopt(IPV6_V6ONLY)")
            }
            _ = try syscall("bind") { address.withSockaddr { Glibc.bind(fd, $0, $1) } }
        } catch {
            closeDescriptor(fd)
            throw error
        }
    }
}
