import CLinuxShims
#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 socket address.
///
/// `init(numericHost:port:)` accepts only numeric hosts and `localhost`, because name resolution (getaddrinfo)
/// blocks; use `EventLoop.resolve(host:port:_:)`, which runs it off the loop threads, for names.
public enum SocketAddress: Equatable, Sendable, CustomStringConvertible {
    case ipv4(host: (UInt8, UInt8, UInt8, UInt8), port: UInt16)
    case ipv6(host: [UInt8], port: UInt16, scopeID: UInt32)

    /// Parses a numeric IPv4/IPv6 host (brackets allowed around IPv6) or `localhost` (→ 127.0.0.1).
    public init(numericHost host: String, port: UInt16) throws(IOError) {
        var name = host
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.lowercased() == "localhost" { name = "127.0.0.1" }
        var v4 = in_addr()
        if inet_pton(AF_INET, name, &v4) == 1 {
            let b = withUnsafeBytes(of: v4.s_addr) { Array($0) }
            self = .ipv4(host: (b[0], b[1], b[2], b[3]), port: port)
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, name, &v6) == 1 {
            self = .ipv6(host: withUnsafeBytes(of: v6) { Array($0) }, port: port, scopeID: 0)
            return
        }
        // EAI_NONAME has no errno; EINVAL with the call name tells the user what was refused.
        throw IOError(errnoCode: EINVAL, call: "numeric address \(host) (host names are not resolved here)")
    }

    public static func == (a: SocketAddress, b: SocketAddress) -> Bool {
        switch (a, b) {
        case (.ipv4(let h1, let p1), .ipv4(let h2, let p2)):
            return h1 == h2 && p1 == p2
        case (.ipv6(let h1, let p1, let s1), .ipv6(let h2, let p2, let s2)):
            return h1 == h2 && p1 == p2 && s1 == s2
        default:
            return false
        }
    }

    /// The port number.
    public var port: UInt16 {
        switch self {
        case .ipv4(_, let port), .ipv6(_, let port, _): port
        }
    }

    /// The address family (AF_INET / AF_INET6).
    var family: Int32 {
        switch self {
        case .ipv4: AF_INET
        case .ipv6: AF_INET6
        }
    }

    /// The host part in numeric text form.
    public var host: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        switch self {
        case .ipv4(let h, _):
            var raw = [h.0, h.1, h.2, h.3]
            _ = inet_ntop(AF_INET, &raw, &text, socklen_t(text.count))
        case .ipv6(let h, _, _):
            var raw = h
            _ = inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count))
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String {
        switch self {
        case .ipv4: "\(host):\(port)"
        case .ipv6: "[\(host)]:\(port)"
        }
    }

    /// Calls `body` with this address as a `sockaddr` pointer and length.
    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch self {
        case .ipv4(let h, let port):
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { raw in
                raw[0] = h.0
                raw[1] = h.1
                raw[2] = h.2
                raw[3] = h.3
            }
            return withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        case .ipv6(let h, let port, let scope):
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            sin6.sin6_scope_id = scope
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { raw in
                for (i, b) in h.prefix(16).enumerated() { raw[i] = b }
            }
            return withUnsafePointer(to: &sin6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    body($0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
    }

    /// Reads an address the kernel filled in (accept, getsockname, getpeername).
    init?(storage: sockaddr_storage) {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let sin = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self) }
            // The four bytes in network order, read without an intermediate array (this runs once per accept).
            let a = UInt32(bigEndian: sin.sin_addr.s_addr)
            self = .ipv4(
                host: (UInt8(a >> 24), UInt8(truncatingIfNeeded: a >> 16), UInt8(truncatingIfNeeded: a >> 8),
                    UInt8(truncatingIfNeeded: a)),
                port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            let sin6 = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self) }
            self = .ipv6(
                host: withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }, port: UInt16(bigEndian: sin6.sin6_port),
                scopeID: sin6.sin6_scope_id)
        default:
            return nil
        }
    }
}

/// Thin wrappers over the socket calls, all going through the errno policy in `syscall`.
enum Socket {
    static func makeTCP(family: Int32) throws(IOError) -> Int32 {
        guard let fd = try syscall("socket", { clinux_tcp_socket(family) }) else {
            throw IOError(errnoCode: EAGAIN, call: "socket")
        }
        return fd
    }

    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32, _ label: StaticString)
        throws(IOError)
    {
        var v = value
        _ = try syscall(label) { setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<Int32>.size)) }
    }

    static func localAddress(_ fd: Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return rc == 0 ? SocketAddress(storage: storage) : nil
    }

    static func peerAddress(_ fd: Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &len) }
        }
        return rc == 0 ? SocketAddress(storage: storage) : nil
    }

    /// The pending socket error (SO_ERROR), used after a non-blocking connect and on EPOLLERR.
    static func pendingError(_ fd: Int32) -> Int32 {
        var value: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        if getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &len) < 0 { return errno }
        return value
    }
}
