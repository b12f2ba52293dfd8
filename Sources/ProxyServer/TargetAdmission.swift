import ProxyEventLoop

/// Which resolved upstream addresses a client may make the proxy connect to. Checked after name resolution, so
/// a host name that resolves to the proxy (or to loopback) is caught like a literal address.
///
/// - The proxy's own listening addresses are refused for everyone: a CONNECT to the proxy chains it into itself,
///   and 2,000 pipelined ones exhausted its descriptors. A listener on 0.0.0.0 or `::` is reached through every
///   address of the host, so any local address with its port is the proxy too.
/// - Loopback addresses are refused for clients that are not on loopback themselves: a device on the network must
///   not reach the services the proxy's host keeps on 127.0.0.1. A `--map` target is the operator's choice and
///   is allowed.
public struct TargetAdmission: Sendable {
    var listeners: [SocketAddress] = []
    /// This host's interface addresses, for listeners on a wildcard address.
    var localAddresses: [SocketAddress] = []
    /// `--map` targets (address and port as written), allowed even on loopback.
    var mappedTargets: Set<String> = []

    public init(localAddresses: [SocketAddress] = [], mappedTargets: Set<String> = []) {
        self.localAddresses = localAddresses
        self.mappedTargets = mappedTargets
    }

    /// Adds a listener's bound address.
    public mutating func addListener(_ address: SocketAddress) {
        listeners.append(address)
    }

    /// Why connecting to `target` (resolved from `requested`, the host as the session named it) is refused, or nil.
    public func refusal(target: SocketAddress, requested: String, clientIsLoopback: Bool) -> String? {
        if isProxyItself(target) {
            return "\(target) is this proxy's own listening address: a request through the proxy to itself would loop"
        }
        if !clientIsLoopback, target.isLoopback || target.isUnspecified,
            !mappedTargets.contains("\(requested.lowercased()):\(target.port)")
        {
            return "\(requested) is on the proxy host's loopback (\(target.host)), which clients on the network may "
                + "not reach through the proxy"
        }
        return nil
    }

    func isProxyItself(_ target: SocketAddress) -> Bool {
        let target = target.unmapped
        return listeners.contains { listener in
            guard listener.port == target.port else { return false }
            if listener.sameHost(as: target) { return true }
            guard listener.isUnspecified else {
                // 0.0.0.0 as a target reaches a loopback listener too, as does any 127/8 address a 127.0.0.1
                // listener does not own: only the exact address and the unspecified one connect.
                return target.isUnspecified && listener.isLoopback
            }
            return target.isLoopback || target.isUnspecified
                || localAddresses.contains { $0.sameHost(as: target) }
        }
    }
}
