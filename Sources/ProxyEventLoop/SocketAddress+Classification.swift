#if canImport(Glibc)
import Glibc
#endif

extension SocketAddress {
    /// The address as IPv4 when it is an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`), else itself: the kernel
    /// connects the two to the same place, so checks must see them alike.
    public var unmapped: SocketAddress {
        guard case .ipv6(let h, let port, _) = self, h.count == 16, h[0..<10].allSatisfy({ $0 == 0 }),
            h[10] == 0xff, h[11] == 0xff
        else { return self }
        return .ipv4(host: (h[12], h[13], h[14], h[15]), port: port)
    }

    /// 127.0.0.0/8 or ::1 (mapped forms included).
    public var isLoopback: Bool {
        switch unmapped {
        case .ipv4(let h, _): h.0 == 127
        case .ipv6(let h, _, _): h == [UInt8](repeating: 0, count: 15) + [1]
        }
    }

    /// 0.0.0.0 or `::`: as a listener, every address of the host; as a connect target, the host itself.
    public var isUnspecified: Bool {
        switch unmapped {
        case .ipv4(let h, _): h == (0, 0, 0, 0)
        case .ipv6(let h, _, _): h.allSatisfy { $0 == 0 }
        }
    }

    /// The same host address, ignoring the port and an IPv6 scope.
    public func sameHost(as other: SocketAddress) -> Bool {
        switch (unmapped, other.unmapped) {
        case (.ipv4(let a, _), .ipv4(let b, _)): a == b
        case (.ipv6(let a, _, _), .ipv6(let b, _, _)): a == b
        default: false
        }
    }

    /// The addresses of this host's interfaces (getifaddrs), with port 0. Empty if the call fails.
    public static func interfaceAddresses() -> [SocketAddress] {
        var first: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&first) == 0 else { return [] }
        defer { freeifaddrs(first) }
        var result: [SocketAddress] = []
        var next = first
        while let entry = next {
            next = entry.pointee.ifa_next
            guard let address = entry.pointee.ifa_addr else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                let sin = UnsafeRawPointer(address).load(as: sockaddr_in.self)
                let b = withUnsafeBytes(of: sin.sin_addr) { Array($0) }
                result.append(.ipv4(host: (b[0], b[1], b[2], b[3]), port: 0))
            case AF_INET6:
                let sin6 = UnsafeRawPointer(address).load(as: sockaddr_in6.self)
                result.append(.ipv6(host: withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }, port: 0, scopeID: 0))
            default:
                continue
            }
        }
        return result
    }
}
