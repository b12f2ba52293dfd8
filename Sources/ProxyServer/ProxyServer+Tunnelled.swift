import ProxyEventLoop

/// A connection that came out of a tunnel the proxy terminates itself (WireGuard mode): the device's address in
/// the tunnel, the destination it connected to, and the name it resolved to that address (the tunnel's DNS), if any.
public struct TunnelledConnection: Sendable {
    public let client: SocketAddress
    public let destination: SocketAddress
    public let resolvedName: String?

    public init(client: SocketAddress, destination: SocketAddress, resolvedName: String? = nil) {
        self.client = client
        self.destination = destination
        self.resolvedName = resolvedName
    }
}

extension ProxyServer {
    /// Serves `fd` (the far end of a stream pair whose near end carries a tunnel's TCP connection) as a client
    /// connection that starts at `connection.destination`, exactly as a transparent one: TLS by SNI, HTTP by Host,
    /// the rest tunnelled. From any thread; the session runs on the group's next loop.
    public func serveTunnelled(fd: Int32, _ connection: TunnelledConnection) {
        group.next().adopt(fd: fd) { [self] loop in
            ClientSide(server: self, loop: loop, sessionID: counter.next(), tunnelled: connection)
        }
    }
}
