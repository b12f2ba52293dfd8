/// The first IP layer above WireGuard: what to do with each packet a device sends into the tunnel. It answers
/// ICMP echo (ping) sent to the proxy's own tunnel address, so the data path is proven both ways; TCP and UDP are
/// recognised and reported as not handled yet (no TCP/IP stack is built: docs/wireguard.md); everything else is
/// dropped with its reason. Sans-io and stateless.
public struct TunnelIPLayer: Sendable {
    /// The proxy's IPv4 address inside the tunnel (the devices' DNS address in their configuration).
    public let address: [UInt8]

    public init(address: [UInt8]) { self.address = address }

    /// What one packet from a device amounts to.
    public enum Verdict: Equatable, Sendable {
        /// Send this packet back to the device (an echo reply).
        case reply([UInt8])
        /// A TCP or UDP packet (IP protocol `protocolNumber`) to `destination`:`port`: not handled in this version.
        case unhandled(protocolNumber: UInt8, destination: String, port: UInt16)
        case dropped(String)
    }

    public func handle(_ bytes: [UInt8]) -> Verdict {
        switch TunnelPacket.parse(bytes) {
        case .failure(let malformed): return .dropped("malformed IP packet (\(malformed.rawValue))")
        case .success(.ipv6(let header, let payload)):
            if header.nextHeader == TunnelPacket.tcp || header.nextHeader == TunnelPacket.udp, payload.count >= 4 {
                let port = UInt16(payload[payload.startIndex + 2]) << 8 | UInt16(payload[payload.startIndex + 3])
                return .unhandled(protocolNumber: header.nextHeader, destination: "IPv6", port: port)
            }
            return .dropped("IPv6 (the tunnel gives devices an IPv4 address only)")
        case .success(.ipv4(let header, let payload)):
            switch header.protocolNumber {
            case TunnelPacket.icmp:
                return echoReply(header, payload) ?? .dropped("ICMP other than an echo request to \(ipv4Text(address))")
            case TunnelPacket.tcp, TunnelPacket.udp:
                // The ports are the first 4 bytes of both headers.
                guard payload.count >= 8 else { return .dropped("truncated TCP or UDP header") }
                let port = UInt16(payload[payload.startIndex + 2]) << 8 | UInt16(payload[payload.startIndex + 3])
                return .unhandled(
                    protocolNumber: header.protocolNumber, destination: ipv4Text(header.destination), port: port)
            default:
                return .dropped("IP protocol \(header.protocolNumber)")
            }
        }
    }

    /// The echo reply to an echo request for our address: same identifier, sequence and data, checksums redone.
    private func echoReply(_ header: IPv4Header, _ payload: ArraySlice<UInt8>) -> Verdict? {
        guard header.destination == address, payload.count >= 8, payload[payload.startIndex] == 8,
            payload[payload.startIndex + 1] == 0, TunnelPacket.internetChecksum(payload) == 0
        else { return nil }
        var icmp = Array(payload)
        icmp[0] = 0
        icmp[2] = 0
        icmp[3] = 0
        let checksum = TunnelPacket.internetChecksum(icmp[...])
        icmp[2] = UInt8(checksum >> 8)
        icmp[3] = UInt8(checksum & 0xFF)
        let reply = IPv4Header(
            source: address, destination: header.source, protocolNumber: TunnelPacket.icmp, ttl: 64,
            identification: header.identification)
        return .reply(reply.serialized(payloadLength: icmp.count) + icmp)
    }
}
