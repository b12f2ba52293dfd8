import CLinuxShims
#if canImport(Glibc)
import Glibc
#endif

/// A bound UDP socket on one loop that answers datagrams one by one: `respond` gets each datagram (valid only during
/// the call) and its sender on the loop's thread, and returns the reply to send back, if any (sent once, best
/// effort: UDP promises no delivery, so a full socket buffer drops it).
///
/// Thread-safety: `address` and `close()` may be used from any thread; the rest runs on `loop`'s thread.
public final class DatagramSocket: @unchecked Sendable {
    // @unchecked Sendable: `fd` and `open` are touched only on `loop`'s thread after start; the rest is immutable.

    /// The address actually bound (with the real port when 0 was asked for).
    public let address: SocketAddress
    let loop: EventLoop
    private let fd: Int32
    private var open = true
    private let respond: (DatagramSocket, UnsafeRawBufferPointer, SocketAddress) -> [UInt8]?
    /// Datagrams read per wake-up at most, so a flood cannot starve the loop's connections.
    static let batch = 64
    /// Larger than any datagram of a 1500-byte path; a longer one is cut (MSG_TRUNC), which the responder sees.
    static let bufferSize = 2048

    init(
        address: SocketAddress, loop: EventLoop,
        respond: @escaping (DatagramSocket, UnsafeRawBufferPointer, SocketAddress) -> [UInt8]?
    ) throws(IOError) {
        guard let fd = try syscall("socket", { clinux_udp_socket(address.family) }) else {
            throw IOError(errnoCode: EAGAIN, call: "socket")
        }
        try Socket.bind(fd, to: address)
        self.fd = fd
        self.address = Socket.localAddress(fd) ?? address
        self.loop = loop
        self.respond = respond
    }

    /// Registers on the loop. Loop thread only.
    func start() {
        guard open else { return }
        if registerForReading(fd) == nil { open = false }
    }

    /// Stops reading and closes the socket. Safe from any thread.
    public func close() { closeFromAnyThread() }

    func closeOnLoop() {
        guard open else { return }
        open = false
        unregister(fd)
    }
}

extension DatagramSocket: BoundSocket {
    func handleEvents(_ events: UInt32) {
        var buffer = [UInt8](repeating: 0, count: Self.bufferSize)
        for _ in 0..<Self.batch {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let count = buffer.withUnsafeMutableBytes { raw in
                withUnsafeMutablePointer(to: &storage) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(fd, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT), $0, &length)
                    }
                }
            }
            guard count >= 0 else {
                // EAGAIN: read everything; anything else (an ICMP error queued for an earlier reply): try the next.
                if errno == EAGAIN || errno == EWOULDBLOCK { return }
                continue
            }
            guard let sender = SocketAddress(storage: storage) else { continue }
            let reply = buffer.withUnsafeBytes { respond(self, UnsafeRawBufferPointer(rebasing: $0[..<count]), sender) }
            guard let reply, !reply.isEmpty else { continue }
            send(reply, to: sender)
        }
    }

    /// The loop the socket lives on (its handlers run there).
    public var eventLoop: EventLoop { loop }

    /// Sends one datagram, best effort (a full socket buffer drops it, as the network may). Loop thread only.
    public func send(_ datagram: [UInt8], to destination: SocketAddress) {
        guard open else { return }
        _ = datagram.withUnsafeBytes { bytes in
            destination.withSockaddr { sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_DONTWAIT), $0, $1) }
        }
    }
}

extension EventLoopGroup {
    /// Binds a UDP socket on `host:port` (numeric) on one loop; `respond` answers each datagram there (see
    /// `DatagramSocket`).
    public func bindDatagrams(
        host: String, port: UInt16,
        respond: @escaping @Sendable (UnsafeRawBufferPointer, SocketAddress) -> [UInt8]?
    ) throws(IOError) -> DatagramSocket {
        try bindDatagrams(host: host, port: port) { _, datagram, sender in respond(datagram, sender) }
    }

    /// Binds a UDP socket on `host:port` (numeric) on one loop; `respond` gets the socket with each datagram, so
    /// that it may also send datagrams of its own (`DatagramSocket.send`) on the loop's thread.
    public func bindDatagrams(
        host: String, port: UInt16,
        respond: @escaping @Sendable (DatagramSocket, UnsafeRawBufferPointer, SocketAddress) -> [UInt8]?
    ) throws(IOError) -> DatagramSocket {
        let loop = next()
        let socket = try DatagramSocket(
            address: try SocketAddress(numericHost: host, port: port), loop: loop, respond: respond)
        guard loop.submit({ socket.start() }) else {
            socket.close()
            throw IOError(errnoCode: ESHUTDOWN, call: "bind (event loop group is shut down)")
        }
        return socket
    }
}
