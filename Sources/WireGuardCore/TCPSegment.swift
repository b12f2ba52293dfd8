/// A TCP segment inside a tunnelled IPv4 packet: the header fields the proxy's small TCP needs, parsed with every
/// length and the checksum checked first (a device is untrusted), and built back with its checksum.
public struct TCPSegment: Equatable, Sendable {
    public var sourcePort: UInt16
    public var destinationPort: UInt16
    public var sequence: UInt32
    public var acknowledgment: UInt32
    public var flags: Flags
    public var window: UInt16
    /// The maximum segment size the sender offered (SYN only), if any.
    public var maximumSegmentSize: UInt16?
    public var payload: ArraySlice<UInt8>

    /// The control bits.
    public struct Flags: OptionSet, Equatable, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let fin = Flags(rawValue: 0x01)
        public static let syn = Flags(rawValue: 0x02)
        public static let rst = Flags(rawValue: 0x04)
        public static let psh = Flags(rawValue: 0x08)
        public static let ack = Flags(rawValue: 0x10)
    }

    public init(
        sourcePort: UInt16, destinationPort: UInt16, sequence: UInt32, acknowledgment: UInt32, flags: Flags,
        window: UInt16, maximumSegmentSize: UInt16? = nil, payload: ArraySlice<UInt8> = []
    ) {
        self.sourcePort = sourcePort
        self.destinationPort = destinationPort
        self.sequence = sequence
        self.acknowledgment = acknowledgment
        self.flags = flags
        self.window = window
        self.maximumSegmentSize = maximumSegmentSize
        self.payload = payload
    }

    /// Sequence space the segment occupies: its payload, plus one for SYN and one for FIN.
    public var sequenceLength: UInt32 {
        UInt32(payload.count) + (flags.contains(.syn) ? 1 : 0) + (flags.contains(.fin) ? 1 : 0)
    }

    /// Why a segment was not taken.
    public enum Malformed: String, Error, Sendable {
        case tooShort, badDataOffset, badChecksum
    }

    /// The segment in `bytes` (the IPv4 payload) sent from `source` to `destination`, checked.
    public static func parse(_ bytes: ArraySlice<UInt8>, source: [UInt8], destination: [UInt8]) -> Result<
        TCPSegment, Malformed
    > {
        guard bytes.count >= 20 else { return .failure(.tooShort) }
        let base = bytes.startIndex
        let offset = Int(bytes[base + 12] >> 4) * 4
        guard offset >= 20, offset <= bytes.count else { return .failure(.badDataOffset) }
        guard TunnelChecksum.transport(source: source, destination: destination, protocolNumber: TunnelPacket.tcp,
            segment: bytes) == 0
        else { return .failure(.badChecksum) }
        func u16(_ at: Int) -> UInt16 { UInt16(bytes[base + at]) << 8 | UInt16(bytes[base + at + 1]) }
        func u32(_ at: Int) -> UInt32 { UInt32(u16(at)) << 16 | UInt32(u16(at + 2)) }
        var segment = TCPSegment(
            sourcePort: u16(0), destinationPort: u16(2), sequence: u32(4), acknowledgment: u32(8),
            flags: Flags(rawValue: bytes[base + 13] & 0x1F), window: u16(14),
            payload: bytes[(base + offset)...])
        // Options: only MSS is read; a malformed option list ends the walk (the segment is still good).
        var index = 20
        while index < offset {
            let kind = bytes[base + index]
            if kind == 0 { break }
            if kind == 1 {
                index += 1
                continue
            }
            guard index + 1 < offset else { break }
            let length = Int(bytes[base + index + 1])
            guard length >= 2, index + length <= offset else { break }
            if kind == 2, length == 4 { segment.maximumSegmentSize = u16(index + 2) }
            index += length
        }
        return .success(segment)
    }

    /// The whole IPv4 packet carrying this segment from `source` to `destination`, both checksums filled in.
    public func packet(from source: [UInt8], to destination: [UInt8], identification: UInt16) -> [UInt8] {
        let headerLength = maximumSegmentSize == nil ? 20 : 24
        var tcp = [UInt8](repeating: 0, count: headerLength)
        tcp.reserveCapacity(headerLength + payload.count)
        func put16(_ value: UInt16, _ at: Int) {
            tcp[at] = UInt8(value >> 8)
            tcp[at + 1] = UInt8(value & 0xFF)
        }
        put16(sourcePort, 0)
        put16(destinationPort, 2)
        put16(UInt16(sequence >> 16), 4)
        put16(UInt16(sequence & 0xFFFF), 6)
        put16(UInt16(acknowledgment >> 16), 8)
        put16(UInt16(acknowledgment & 0xFFFF), 10)
        tcp[12] = UInt8(headerLength / 4) << 4
        tcp[13] = flags.rawValue
        put16(window, 14)
        if let mss = maximumSegmentSize {
            tcp[20] = 2
            tcp[21] = 4
            put16(mss, 22)
        }
        tcp += payload
        let checksum = TunnelChecksum.transport(
            source: source, destination: destination, protocolNumber: TunnelPacket.tcp, segment: tcp[...])
        put16(checksum, 16)
        let ip = IPv4Header(
            source: source, destination: destination, protocolNumber: TunnelPacket.tcp, ttl: 64,
            identification: identification)
        return ip.serialized(payloadLength: tcp.count) + tcp
    }
}

/// The checksum of TCP and UDP over IPv4: RFC 1071's sum over the pseudo-header (RFC 793 §3.1) and the segment.
public enum TunnelChecksum {
    /// 0 for a received segment whose checksum is right; for one being built (checksum field zero), the value to
    /// put in it.
    public static func transport(
        source: [UInt8], destination: [UInt8], protocolNumber: UInt8, segment: ArraySlice<UInt8>
    ) -> UInt16 {
        var sum: UInt32 = 0
        for i in stride(from: 0, to: 4, by: 2) {
            sum += UInt32(source[i]) << 8 | UInt32(source[i + 1])
            sum += UInt32(destination[i]) << 8 | UInt32(destination[i + 1])
        }
        sum += UInt32(protocolNumber)
        sum += UInt32(segment.count)
        return TunnelPacket.internetChecksum(segment, initial: sum)
    }
}
