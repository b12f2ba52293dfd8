/// The proxy's end of the tunnel: WireGuard (`WireGuardResponder`) with the IP layer above it (`TunnelIPLayer`).
/// One datagram in, at most one datagram back to its sender, and what happened, to be logged or counted.
/// Sans-io: the caller owns the UDP socket and passes a monotonic time in nanoseconds.
public struct WireGuardTunnel: Sendable {
    public var responder: WireGuardResponder
    public let ipLayer: TunnelIPLayer
    /// TCP and UDP packets the devices sent that this version drops (no TCP/IP stack yet), by protocol.
    public private(set) var droppedTCP = 0
    public private(set) var droppedUDP = 0

    public init(responder: WireGuardResponder, address: [UInt8]) {
        self.responder = responder
        ipLayer = TunnelIPLayer(address: address)
    }

    /// What one datagram amounted to.
    public enum Event: Equatable, Sendable {
        /// A device completed a handshake (peer index into the responder's peers).
        case handshake(peer: Int)
        /// The first TCP or UDP packet into the tunnel: dropped, as every one after it (counted).
        case firstUnhandled(protocolNumber: UInt8, destination: String, port: UInt16)
        /// A ping to the proxy's tunnel address answered.
        case echo(peer: Int)
        case dropped(String)
        /// Nothing worth a word (a keepalive, a packet after the first unhandled one).
        case none
    }

    /// Takes one datagram: the reply to send to its sender, if any, and the event.
    public mutating func receive(_ datagram: [UInt8], now: UInt64) -> (reply: [UInt8]?, event: Event) {
        switch responder.receive(datagram, now: now) {
        case .handshake(let peer, let response): return (response, .handshake(peer: peer))
        case .keepalive, .established: return (nil, .none)
        case .dropped(let drop): return (nil, .dropped(drop.rawValue))
        case .packet(let peer, let packet):
            switch ipLayer.handle(packet) {
            case .reply(let reply): return (responder.send(reply, to: peer, now: now), .echo(peer: peer))
            case .dropped(let reason): return (nil, .dropped(reason))
            case .unhandled(let protocolNumber, let destination, let port):
                let first = droppedTCP + droppedUDP == 0
                if protocolNumber == TunnelPacket.tcp { droppedTCP += 1 } else { droppedUDP += 1 }
                return (
                    nil,
                    first
                        ? .firstUnhandled(protocolNumber: protocolNumber, destination: destination, port: port) : .none
                )
            }
        }
    }
}
