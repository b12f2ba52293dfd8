/// A UDP datagram inside an IPv4 packet from the tunnel (RFC 768), its length and checksum checked.
public struct UDPDatagram: Equatable, Sendable {
    public var source: [UInt8]
    public var sourcePort: UInt16
    public var destination: [UInt8]
    public var destinationPort: UInt16
    /// The data after the 8-byte UDP header, as far as the UDP length field says.
    public var payload: ArraySlice<UInt8>

    public init(
        source: [UInt8], sourcePort: UInt16, destination: [UInt8], destinationPort: UInt16,
        payload: ArraySlice<UInt8>
    ) {
        self.source = source
        self.sourcePort = sourcePort
        self.destination = destination
        self.destinationPort = destinationPort
        self.payload = payload
    }

    /// Why a datagram could not be parsed.
    public enum Malformed: String, Error, Sendable {
        /// The IP header's protocol is not UDP (17).
        case notUDP
        /// Fewer than the 8 bytes of a UDP header.
        case tooShort
        /// The UDP length field is below 8 or past the end of the IP payload.
        case badLength
        /// The checksum is nonzero and wrong.
        case badChecksum
    }

    /// The datagram in `segment`, the payload of an IPv4 packet with `header` (as `TunnelPacket.parse` gives them).
    ///
    /// The UDP length field may be shorter than the IP payload (the rest is ignored, as Linux does) but not longer.
    /// A checksum of 0 means none was computed (RFC 768, allowed over IPv4); any other is verified over the IPv4
    /// pseudo-header and the datagram's own length.
    public static func parse(_ header: IPv4Header, segment: ArraySlice<UInt8>) -> Result<UDPDatagram, Malformed> {
        guard header.protocolNumber == TunnelPacket.udp else { return .failure(.notUDP) }
        guard segment.count >= 8 else { return .failure(.tooShort) }
        let start = segment.startIndex
        func word(_ offset: Int) -> UInt16 {
            UInt16(segment[start + offset]) << 8 | UInt16(segment[start + offset + 1])
        }
        let length = Int(word(4))
        guard length >= 8, length <= segment.count else { return .failure(.badLength) }
        let datagram = segment[start..<(start + length)]
        if word(6) != 0 {
            let check = TunnelPacket.transportChecksum(
                source: header.source, destination: header.destination, protocolNumber: TunnelPacket.udp,
                segment: datagram)
            guard check == 0 else { return .failure(.badChecksum) }
        }
        return .success(
            UDPDatagram(
                source: header.source, sourcePort: word(0), destination: header.destination,
                destinationPort: word(2), payload: datagram[(start + 8)...]))
    }
}

extension TunnelPacket {
    /// The largest UDP payload an IPv4 packet can carry (65,535 − 20 − 8).
    public static let maximumUDPPayload = 65_507

    /// A whole IPv4 packet (20-byte header, no options, TTL 64, don't-fragment) carrying a UDP datagram from
    /// `from`:`fromPort` to `to`:`toPort`, both checksums filled in (a UDP checksum that computes to 0 is sent as
    /// 0xFFFF, RFC 768). `payload` may be any size up to `maximumUDPPayload` (a longer one is a programming error);
    /// note that the devices' tunnel MTU (wg-quick's default 1,420) caps what they take in one packet.
    public static func udpPacket(
        from: [UInt8], fromPort: UInt16, to: [UInt8], toPort: UInt16, payload: [UInt8], identification: UInt16
    ) -> [UInt8] {
        precondition(payload.count <= maximumUDPPayload, "a UDP payload of \(payload.count) bytes does not fit IPv4")
        precondition(from.count == 4 && to.count == 4, "IPv4 addresses are 4 bytes")
        let length = 8 + payload.count
        let header = IPv4Header(
            source: from, destination: to, protocolNumber: udp, ttl: 64, identification: identification)
        var packet = header.serialized(payloadLength: length)
        packet.reserveCapacity(20 + length)
        packet += [UInt8(fromPort >> 8), UInt8(fromPort & 0xFF), UInt8(toPort >> 8), UInt8(toPort & 0xFF)]
        packet += [UInt8(length >> 8), UInt8(length & 0xFF), 0, 0]
        packet += payload
        var checksum = transportChecksum(source: from, destination: to, protocolNumber: udp, segment: packet[20...])
        if checksum == 0 { checksum = 0xFFFF }
        packet[26] = UInt8(checksum >> 8)
        packet[27] = UInt8(checksum & 0xFF)
        return packet
    }

    /// The checksum of a transport segment (UDP, TCP) with its pseudo-header (RFC 768, RFC 9293 §3.1): the value
    /// to store in the segment's checksum field when `segment` has 0 there, and 0 when `segment`, as received,
    /// carries the right one. The pseudo-header is summed in place (no bytes are copied), and the segment 4 bytes at
    /// a time, so this is cheap enough for every TCP segment.
    ///
    /// General: `source` and `destination` may be IPv4 (4 bytes) or IPv6 (16 bytes) addresses, since IPv6's
    /// pseudo-header (RFC 8200 §8.1: the addresses, a 32-bit length, the next header) has the same one's-complement
    /// sum as IPv4's (the addresses, a zero byte and the protocol, a 16-bit length). The segment's length is
    /// `segment.count`.
    public static func transportChecksum(
        source: [UInt8], destination: [UInt8], protocolNumber: UInt8, segment: ArraySlice<UInt8>
    ) -> UInt16 {
        var sum = UInt64(protocolNumber) + UInt64(segment.count & 0xFFFF) + UInt64(segment.count >> 16)
        sum += source.withUnsafeBytes { onesComplementSum($0) }
        sum += destination.withUnsafeBytes { onesComplementSum($0) }
        sum += segment.withUnsafeBytes { onesComplementSum($0) }
        return ~fold(sum)
    }

    /// `transportChecksum` of a whole array.
    public static func transportChecksum(
        source: [UInt8], destination: [UInt8], protocolNumber: UInt8, segment: [UInt8]
    ) -> UInt16 {
        transportChecksum(
            source: source, destination: destination, protocolNumber: protocolNumber, segment: segment[...])
    }

    /// The unfolded one's-complement sum of `bytes` read as big-endian 16-bit words (a last odd byte padded with
    /// zero). Words are added in pairs, as 32-bit loads into a 64-bit sum: folding that to 16 bits gives the same
    /// result as adding 16-bit words (RFC 1071 §2(C)), and the sum cannot overflow below 16 GiB of input.
    static func onesComplementSum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var sum: UInt64 = 0
        var index = 0
        let count = bytes.count
        while index + 4 <= count {
            sum += UInt64(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: index, as: UInt32.self)))
            index += 4
        }
        if index + 2 <= count {
            sum += UInt64(bytes[index]) << 8 | UInt64(bytes[index + 1])
            index += 2
        }
        if index < count { sum += UInt64(bytes[index]) << 8 }
        return sum
    }

    /// `sum` folded to 16 bits with end-around carries.
    static func fold(_ sum: UInt64) -> UInt16 {
        var sum = sum
        while sum >> 16 != 0 { sum = (sum & 0xFFFF) + (sum >> 16) }
        return UInt16(sum)
    }
}
