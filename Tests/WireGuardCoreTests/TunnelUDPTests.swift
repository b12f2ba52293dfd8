import Testing

@testable import WireGuardCore

/// Bytes from a hex literal (test data only).
func hexBytes(_ text: String) -> [UInt8] {
    let digits = Array(text.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

/// RFC 1071's checksum the slow, obvious way: the pseudo-header built as an array, then 16-bit words one by one.
func referenceChecksum(source: [UInt8], destination: [UInt8], protocolNumber: UInt8, segment: [UInt8]) -> UInt16 {
    var bytes = source + destination + [0, protocolNumber, UInt8(segment.count >> 8), UInt8(segment.count & 0xFF)]
    bytes += segment
    if bytes.count % 2 == 1 { bytes.append(0) }
    var sum = 0
    for index in stride(from: 0, to: bytes.count, by: 2) { sum += Int(bytes[index]) << 8 | Int(bytes[index + 1]) }
    while sum >> 16 != 0 { sum = (sum & 0xFFFF) + (sum >> 16) }
    return ~UInt16(sum)
}

@Suite("WireGuard tunnel UDP")
struct TunnelUDPTests {
    let proxy: [UInt8] = [198, 19, 0, 1]
    let device: [UInt8] = [198, 19, 0, 2]

    /// A DNS query for example.com (glibc's `res_mkquery`, id 0x2a8f) from the device's port 53000 to the proxy's
    /// port 53, IP id 0x1234; both checksums computed by an independent Python implementation of RFC 1071.
    static let knownPacket = hexBytes(
        """
        45000039 12344000 40119c56 c6130002 c6130001
        cf080035 0025aa3f
        2a8f0100 00010000 00000000 07657861 6d706c65 03636f6d 00000100 01
        """)

    @Test("RFC 1071's worked example, and a known packet built byte for byte by udpPacket")
    func knownAnswers() {
        // RFC 1071 §3: the sum of 0001 f203 f4f5 f6f7 is ddf2, so the checksum is its complement.
        #expect(TunnelPacket.internetChecksum([0x00, 0x01, 0xF2, 0x03, 0xF4, 0xF5, 0xF6, 0xF7][...]) == ~0xDDF2)
        let query = Array(Self.knownPacket[28...])
        let built = TunnelPacket.udpPacket(
            from: device, fromPort: 53000, to: proxy, toPort: 53, payload: query, identification: 0x1234)
        #expect(built == Self.knownPacket)
    }

    @Test("transportChecksum agrees with the byte-by-byte reference at every length, offset and address size")
    func checksumAgainstReference() {
        var generator = SystemRandomNumberGenerator()
        let buffer = (0..<1600).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let v6a = (0..<16).map { UInt8($0 * 17) }, v6b = (0..<16).map { UInt8(255 - $0) }
        for length in 0..<300 {
            for offset in [0, 1, 2, 3] {
                let segment = buffer[offset..<(offset + length)]
                for (source, destination) in [(device, proxy), (v6a, v6b)] {
                    let fast = TunnelPacket.transportChecksum(
                        source: source, destination: destination, protocolNumber: 6, segment: segment)
                    let slow = referenceChecksum(
                        source: source, destination: destination, protocolNumber: 6, segment: Array(segment))
                    #expect(fast == slow, "length \(length) offset \(offset)")
                }
            }
        }
        // All ones (the largest sums) and the longest IPv4 segment.
        let ones = [UInt8](repeating: 0xFF, count: 65_515)
        #expect(
            TunnelPacket.transportChecksum(source: proxy, destination: device, protocolNumber: 17, segment: ones)
                == referenceChecksum(source: proxy, destination: device, protocolNumber: 17, segment: ones))
    }

    @Test("udpPacket round trip: TunnelPacket.parse, then UDPDatagram.parse, at every payload size to 1400")
    func roundTrip() throws {
        for size in 0...1400 {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ size) }
            let packet = TunnelPacket.udpPacket(
                from: proxy, fromPort: 443, to: device, toPort: 61_000, payload: payload,
                identification: UInt16(size))
            #expect(packet.count == 28 + size)
            guard case .success(.ipv4(let header, let segment)) = TunnelPacket.parse(packet + [0, 0, 0]) else {
                Issue.record("size \(size): the IP packet does not parse")
                return
            }
            #expect(header.protocolNumber == TunnelPacket.udp && header.identification == UInt16(size))
            // The checksum verified by recomputation, independently of UDPDatagram.
            #expect(packet[26] != 0 || packet[27] != 0)
            #expect(
                referenceChecksum(source: proxy, destination: device, protocolNumber: 17, segment: Array(segment))
                    == 0)
            let datagram = try UDPDatagram.parse(header, segment: segment).get()
            #expect(datagram.source == proxy && datagram.destination == device)
            #expect(datagram.sourcePort == 443 && datagram.destinationPort == 61_000)
            #expect(Array(datagram.payload) == payload)
        }
    }

    @Test("A UDP checksum that computes to 0 is sent as FFFF and verifies")
    func zeroChecksumSentAsOnes() throws {
        // Two payload bytes chosen to make the sum FFFF: the checksum field then computes to 0.
        let base = TunnelPacket.udpPacket(
            from: proxy, fromPort: 1, to: device, toPort: 2, payload: [0, 0], identification: 0)
        let needed = UInt16(base[26]) << 8 | UInt16(base[27])
        let packet = TunnelPacket.udpPacket(
            from: proxy, fromPort: 1, to: device, toPort: 2, payload: [UInt8(needed >> 8), UInt8(needed & 0xFF)],
            identification: 0)
        #expect(packet[26] == 0xFF && packet[27] == 0xFF)
        guard case .success(.ipv4(let header, let segment)) = TunnelPacket.parse(packet) else {
            Issue.record("does not parse")
            return
        }
        #expect(throws: Never.self) { try UDPDatagram.parse(header, segment: segment).get() }
    }

    @Test("Bad datagrams are refused: not UDP, short, lengths, checksum; a zero checksum is not checked")
    func malformed() {
        guard case .success(.ipv4(let header, let segment)) = TunnelPacket.parse(Self.knownPacket) else {
            Issue.record("the known packet does not parse")
            return
        }
        var tcp = header
        tcp.protocolNumber = TunnelPacket.tcp
        #expect(UDPDatagram.parse(tcp, segment: segment) == .failure(.notUDP))
        for length in 0..<8 {
            #expect(UDPDatagram.parse(header, segment: segment.prefix(length)) == .failure(.tooShort))
        }
        func with(_ offset: Int, _ value: UInt8) -> ArraySlice<UInt8> {
            var bytes = Array(segment)
            bytes[offset] = value
            return bytes[...]
        }
        #expect(UDPDatagram.parse(header, segment: with(5, 7)) == .failure(.badLength))
        #expect(UDPDatagram.parse(header, segment: with(5, 0x26)) == .failure(.badLength))
        #expect(UDPDatagram.parse(header, segment: with(20, 0x41)) == .failure(.badChecksum))
        var spoofed = header
        spoofed.source = [10, 0, 0, 1]
        #expect(UDPDatagram.parse(spoofed, segment: segment) == .failure(.badChecksum))
        // No checksum (0): taken as it is.
        var unchecked = with(6, 0)
        unchecked[unchecked.startIndex + 7] = 0
        unchecked[unchecked.startIndex + 20] = 0x41
        #expect((try? UDPDatagram.parse(header, segment: unchecked).get())?.payload.count == 29)
        // A UDP length shorter than the IP payload: the rest is ignored (checksum over the UDP length only).
        let padded = TunnelPacket.udpPacket(
            from: device, fromPort: 5, to: proxy, toPort: 6, payload: [1, 2, 3], identification: 0)
        var longer = padded + [9, 9]
        longer[3] += 2
        longer[10] = 0
        longer[11] = 0
        let sum = TunnelPacket.internetChecksum(longer[0..<20])
        longer[10] = UInt8(sum >> 8)
        longer[11] = UInt8(sum & 0xFF)
        guard case .success(.ipv4(let paddedHeader, let paddedSegment)) = TunnelPacket.parse(longer) else {
            Issue.record("the padded packet does not parse")
            return
        }
        #expect(paddedSegment.count == 13)
        #expect((try? UDPDatagram.parse(paddedHeader, segment: paddedSegment).get())?.payload == [1, 2, 3][...])
    }
}
