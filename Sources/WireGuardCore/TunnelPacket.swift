/// An IP packet out of the tunnel, parsed with every length and the IPv4 header checksum checked first: anything
/// a device sends is untrusted. The buffer may be longer than the packet (WireGuard pads to 16 bytes); the IP
/// header's length says where the packet ends.
public enum TunnelPacket: Equatable, Sendable {
    case ipv4(IPv4Header, payload: ArraySlice<UInt8>)
    case ipv6(IPv6Header, payload: ArraySlice<UInt8>)

    /// Why a packet could not be parsed.
    public enum Malformed: String, Error, Sendable {
        case tooShort, badVersion, badHeaderLength, badTotalLength, badChecksum, fragment
    }

    /// IP protocol numbers this layer distinguishes.
    public static let icmp: UInt8 = 1, tcp: UInt8 = 6, udp: UInt8 = 17, icmpv6: UInt8 = 58

    /// The packet at the start of `bytes`, checked.
    public static func parse(_ bytes: [UInt8]) -> Result<TunnelPacket, Malformed> {
        guard let first = bytes.first else { return .failure(.tooShort) }
        switch first >> 4 {
        case 4:
            guard bytes.count >= 20 else { return .failure(.tooShort) }
            let headerLength = Int(first & 0x0F) * 4
            let total = Int(bytes[2]) << 8 | Int(bytes[3])
            guard headerLength >= 20, headerLength <= bytes.count else { return .failure(.badHeaderLength) }
            guard total >= headerLength, total <= bytes.count else { return .failure(.badTotalLength) }
            guard internetChecksum(bytes[0..<headerLength]) == 0 else { return .failure(.badChecksum) }
            // More fragments, or an offset: reassembly is not built (devices send whole packets under the MTU).
            guard bytes[6] & 0x20 == 0, (Int(bytes[6] & 0x1F) << 8 | Int(bytes[7])) == 0 else {
                return .failure(.fragment)
            }
            let header = IPv4Header(
                source: Array(bytes[12..<16]), destination: Array(bytes[16..<20]), protocolNumber: bytes[9],
                ttl: bytes[8], identification: UInt16(bytes[4]) << 8 | UInt16(bytes[5]))
            return .success(.ipv4(header, payload: bytes[headerLength..<total]))
        case 6:
            guard bytes.count >= 40 else { return .failure(.tooShort) }
            let payloadLength = Int(bytes[4]) << 8 | Int(bytes[5])
            guard 40 + payloadLength <= bytes.count else { return .failure(.badTotalLength) }
            let header = IPv6Header(
                source: Array(bytes[8..<24]), destination: Array(bytes[24..<40]), nextHeader: bytes[6],
                hopLimit: bytes[7])
            return .success(.ipv6(header, payload: bytes[40..<(40 + payloadLength)]))
        default:
            return .failure(.badVersion)
        }
    }

    /// RFC 1071's checksum of `bytes` (0 over a header whose checksum is right), with `initial` a partial sum.
    static func internetChecksum(_ bytes: ArraySlice<UInt8>, initial: UInt32 = 0) -> UInt16 {
        ~fold(UInt64(initial) + bytes.withUnsafeBytes { onesComplementSum($0) })
    }
}

/// The fields of an IPv4 header this layer uses.
public struct IPv4Header: Equatable, Sendable {
    public var source: [UInt8]
    public var destination: [UInt8]
    public var protocolNumber: UInt8
    public var ttl: UInt8
    public var identification: UInt16

    /// A 20-byte header (no options) for a packet of `payloadLength` bytes, its checksum filled in.
    func serialized(payloadLength: Int) -> [UInt8] {
        let total = 20 + payloadLength
        var header: [UInt8] =
            [
                0x45, 0, UInt8(total >> 8), UInt8(total & 0xFF), UInt8(identification >> 8),
                UInt8(identification & 0xFF),
                0x40, 0, ttl, protocolNumber, 0, 0,
            ] + source + destination
        let checksum = TunnelPacket.internetChecksum(header[...])
        header[10] = UInt8(checksum >> 8)
        header[11] = UInt8(checksum & 0xFF)
        return header
    }
}

/// The fields of an IPv6 header this layer uses (extension headers are not followed).
public struct IPv6Header: Equatable, Sendable {
    public var source: [UInt8]
    public var destination: [UInt8]
    public var nextHeader: UInt8
    public var hopLimit: UInt8
}

/// Dotted-quad text of a 4-byte address.
public func ipv4Text(_ address: [UInt8]) -> String { address.map(String.init).joined(separator: ".") }
