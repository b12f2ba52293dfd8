import CLinuxShims
#if canImport(Glibc)
import Glibc
#endif

/// Where an accepted connection was going before netfilter redirected it to the proxy (transparent mode: an
/// nftables `redirect` on the devices' gateway), read from the connection-tracking table with SO_ORIGINAL_DST
/// (IPv4) or IP6T_SO_ORIGINAL_DST (IPv6).
public enum OriginalDestination: Equatable, Sendable {
    /// Redirected: the address the client connected to.
    case redirected(SocketAddress)
    /// The client connected to the proxy's own address and port: nothing redirected it.
    case notRedirected
    /// The kernel could not say (no tracked connection, or connection tracking not loaded).
    case unavailable(IOError)
}

extension Connection {
    /// The connection's destination before a redirect (one getsockopt and one getsockname). Loop thread only.
    public var originalDestination: OriginalDestination {
        guard let local = localAddress else { return .unavailable(IOError(errnoCode: EBADF, call: "getsockname")) }
        // A dual-stack socket carries IPv4 clients as mapped addresses, tracked as IPv4 connections.
        let ipv6: Bool = if case .ipv6 = local.unmapped { true } else { false }
        switch OriginalDestination.read(fd: fd, ipv6: ipv6) {
        case .success(let address):
            return address.unmapped == local.unmapped ? .notRedirected : .redirected(address)
        case .failure(let error):
            return .unavailable(error)
        }
    }
}

extension OriginalDestination {
    static func read(fd: Int32, ipv6: Bool) -> Result<SocketAddress, IOError> {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let call = ipv6 ? "getsockopt(IP6T_SO_ORIGINAL_DST)" : "getsockopt(SO_ORIGINAL_DST)"
        guard clinux_original_destination(fd, ipv6 ? 1 : 0, &storage, &length) == 0 else {
            return .failure(IOError(errnoCode: errno, call: call))
        }
        guard let address = SocketAddress(storage: storage) else {
            return .failure(IOError(errnoCode: EAFNOSUPPORT, call: call))
        }
        return .success(address)
    }

    /// Why no connection of this family could ever have its original destination read here, or nil when the
    /// kernel can answer (asked of a fresh, unconnected socket: "no such connection" means the option exists).
    /// `ipv6` asks for IPv6 connections.
    public static func unsupportedReason(ipv6: Bool) -> String? {
        let fd = clinux_tcp_socket(ipv6 ? AF_INET6 : AF_INET)
        guard fd >= 0 else { return "cannot make a socket to check for it: \(String(cString: strerror(errno)))" }
        defer { closeDescriptor(fd) }
        switch read(fd: fd, ipv6: ipv6) {
        case .success:
            return nil
        case .failure(let error) where error.errnoCode == ENOENT:
            return nil
        case .failure(let error) where error.errnoCode == ENOPROTOOPT || error.errnoCode == EOPNOTSUPP:
            return "the kernel's connection tracking (nf_conntrack\(ipv6 ? ", IPv6" : "")) is not loaded, so "
                + "\(error.call) cannot tell where a redirected connection was going; loading the nftables "
                + "ruleset (atsproxy run --mode transparent --print-nft | sudo nft -f -) loads it"
        case .failure(let error):
            return "\(error)"
        }
    }
}
