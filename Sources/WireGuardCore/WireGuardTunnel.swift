/// The proxy's end of the tunnel: WireGuard (`WireGuardResponder`), the IP layer above it (`TunnelIPLayer`), and
/// one small TCP (`TunnelTCP`) per device. Datagrams in; datagrams out (to the sender, or to a device by index) and
/// what happened: TCP events for the sessions, UDP datagrams for the caller to answer (DNS, QUIC), things to log.
/// Sans-io: the caller owns the UDP socket, the sessions and the clock (monotonic nanoseconds).
///
/// Cryptokey routing (the WireGuard paper §2): a device may only send from its own tunnel address, so one device
/// can never speak for another; a packet from any other source is dropped.
public struct WireGuardTunnel: Sendable {
    public var responder: WireGuardResponder
    public let ipLayer: TunnelIPLayer
    /// Each device's tunnel address, by peer index.
    public let deviceAddresses: [[UInt8]]
    private var tcp: [TunnelTCP]
    /// Packets dropped, for the shutdown summary.
    public private(set) var dropped = 0

    public init(responder: WireGuardResponder, address: [UInt8], deviceAddresses: [[UInt8]],
        limits: TunnelTCP.Limits = TunnelTCP.Limits())
    {
        precondition(deviceAddresses.count == responder.peerCount, "one tunnel address per configured device")
        self.responder = responder
        ipLayer = TunnelIPLayer(address: address)
        self.deviceAddresses = deviceAddresses
        tcp = deviceAddresses.map { _ in TunnelTCP(limits: limits) }
    }

    /// What a datagram (or a TCP call) amounted to.
    public enum Event: Equatable, Sendable {
        /// A device completed a handshake (peer index into the responder's peers).
        case handshake(peer: Int)
        /// A ping to the proxy's tunnel address answered.
        case echo(peer: Int)
        /// Something for the session of one of a device's TCP connections.
        case tcp(peer: Int, TunnelTCP.Event)
        /// A UDP datagram (header and data) from a device: the caller answers it with `sendPacket`, or not.
        case udp(peer: Int, IPv4Header, datagram: ArraySlice<UInt8>)
        case dropped(String)
    }

    /// Datagrams to send and events, in order.
    public struct Output: Sendable {
        /// Datagrams for the address the received datagram came from (handshake responses).
        public var replies: [[UInt8]] = []
        /// Datagrams for a device, by peer index (sent to the address its last datagram came from).
        public var datagrams: [(peer: Int, datagram: [UInt8])] = []
        public var events: [Event] = []
        public init() {}
    }

    /// Takes one datagram received at `now`.
    public mutating func receive(_ datagram: [UInt8], now: UInt64) -> Output {
        var out = Output()
        switch responder.receive(datagram, now: now) {
        case .handshake(let peer, let response):
            out.replies.append(response)
            out.events.append(.handshake(peer: peer))
        case .keepalive, .established: break
        case .dropped(let drop):
            dropped += 1
            out.events.append(.dropped(drop.rawValue))
        case .packet(let peer, let packet):
            switch ipLayer.handle(packet) {
            case .reply(let reply):
                if let sealed = responder.send(reply, to: peer, now: now) { out.datagrams.append((peer, sealed)) }
                out.events.append(.echo(peer: peer))
            case .tcp(let segment, let source, let destination):
                guard source == deviceAddresses[peer] else { return drop("TCP from \(ipv4Text(source)), not the device's address", &out) }
                let result = tcp[peer].receive(segment, source: source, destination: destination, now: now)
                seal(result, peer: peer, now: now, into: &out)
            case .udp(let header, let payload):
                guard header.source == deviceAddresses[peer] else {
                    return drop("UDP from \(ipv4Text(header.source)), not the device's address", &out)
                }
                out.events.append(.udp(peer: peer, header, datagram: payload))
            case .dropped(let reason):
                return drop(reason, &out)
            }
        }
        return out
    }

    private mutating func drop(_ reason: String, _ out: inout Output) -> Output {
        dropped += 1
        out.events.append(.dropped(reason))
        return out
    }

    /// Runs `body` on device `peer`'s TCP (send, finish, abort, pause) and seals what it sends.
    public mutating func withTCP(
        of peer: Int, now: UInt64, _ body: (inout TunnelTCP) -> TunnelTCP.Output
    ) -> Output {
        var out = Output()
        let result = body(&tcp[peer])
        seal(result, peer: peer, now: now, into: &out)
        return out
    }

    /// The TCP of device `peer`, read only.
    public func tcpState(of peer: Int) -> TunnelTCP { tcp[peer] }

    /// An IP packet for device `peer` (a DNS answer, a QUIC refusal), sealed; nil without a session to it.
    public mutating func sendPacket(_ packet: [UInt8], to peer: Int, now: UInt64) -> [UInt8]? {
        responder.send(packet, to: peer, now: now)
    }

    /// Timers: TCP retransmissions and TIME-WAIT ends of every device, and WireGuard's passive keepalives.
    public mutating func tick(now: UInt64) -> Output {
        var out = Output()
        for peer in tcp.indices {
            let result = tcp[peer].tick(now: now)
            seal(result, peer: peer, now: now, into: &out)
        }
        for (peer, keepalive) in responder.keepalives(now: now) { out.datagrams.append((peer, keepalive)) }
        return out
    }

    /// The earliest TCP deadline of any device, for the caller's timer.
    public var nextDeadline: UInt64? { tcp.compactMap(\.nextDeadline).min() }

    private mutating func seal(_ result: TunnelTCP.Output, peer: Int, now: UInt64, into out: inout Output) {
        for packet in result.packets {
            if let sealed = responder.send(packet, to: peer, now: now) { out.datagrams.append((peer, sealed)) }
        }
        out.events += result.events.map { .tcp(peer: peer, $0) }
    }
}
