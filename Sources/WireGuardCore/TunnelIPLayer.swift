/// The IP layer above WireGuard: what each packet a device sends into the tunnel is. It answers ICMP echo (ping)
/// sent to the proxy's own tunnel address, hands TCP segments and UDP datagrams up (checked, with their addresses),
/// and drops everything else with its reason. Sans-io and stateless.
public struct TunnelIPLayer: Sendable {
    /// The proxy's IPv4 address inside the tunnel (the devices' DNS address in their configuration).
    public let address: [UInt8]

    public init(address: [UInt8]) { self.address = address }

    /// What one packet from a device amounts to.
    public enum Verdict: Equatable, Sendable {
        /// Send this packet back to the device (an echo reply).
        case reply([UInt8])
        /// A TCP segment, checked (length, checksum), from `source` to `destination`.
        case tcp(TCPSegment, source: [UInt8], destination: [UInt8])
        /// A UDP datagram (header and data) from `source` to `destination`.
        case udp(IPv4Header, datagram: ArraySlice<UInt8>)
        case dropped(String)
    }

    public func handle(_ bytes: [UInt8]) -> Verdict {
        switch TunnelPacket.parse(bytes) {
        case .failure(let malformed): return .dropped("malformed IP packet (\(malformed.rawValue))")
        case .success(.ipv6):
            return .dropped("IPv6 (the tunnel gives devices an IPv4 address only)")
        case .success(.ipv4(let header, let payload)):
            switch header.protocolNumber {
            case TunnelPacket.icmp:
                return echoReply(header, payload) ?? .dropped("ICMP other than an echo request to \(ipv4Text(address))")
            case TunnelPacket.tcp:
                switch TCPSegment.parse(payload, source: header.source, destination: header.destination) {
                case .success(let segment): return .tcp(segment, source: header.source, destination: header.destination)
                case .failure(let malformed): return .dropped("malformed TCP segment (\(malformed.rawValue))")
                }
            case TunnelPacket.udp:
                guard payload.count >= 8 else { return .dropped("truncated UDP header") }
                return .udp(header, datagram: payload)
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
