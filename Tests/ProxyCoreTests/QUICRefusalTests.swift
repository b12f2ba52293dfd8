import Testing

@testable import ProxyCore

/// Transparent mode's refusal of QUIC: the long header read from a device's datagram, the Version Negotiation
/// answer, and the count of attempts.
@Suite("QUIC refusal")
struct QUICRefusalTests {
    /// A client's first datagram: a long-header Initial of QUIC v1, padded to `size`.
    static func initial(dcid: [UInt8], scid: [UInt8], version: UInt32 = 1, size: Int = 1200) -> [UInt8] {
        var datagram: [UInt8] = [0xC3]
        withUnsafeBytes(of: version.bigEndian) { datagram += $0 }
        datagram += [UInt8(dcid.count)] + dcid + [UInt8(scid.count)] + scid
        return datagram + [UInt8](repeating: 0, count: max(0, size - datagram.count))
    }

    private func refusal(_ datagram: [UInt8]) -> (header: QUICLongHeader, reply: [UInt8])? {
        datagram.withUnsafeBytes { QUICLongHeader.refusal(of: $0) }
    }

    @Test("An Initial is answered with Version Negotiation: IDs crosswise, only the reserved version listed")
    func versionNegotiation() throws {
        let dcid: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8], scid: [UInt8] = [9, 9, 9]
        let (header, reply) = try #require(refusal(Self.initial(dcid: dcid, scid: scid)))
        #expect(header.version == 1)
        #expect(header.destinationID == dcid)
        #expect(reply[0] & 0x80 != 0, "a long header")
        #expect(Array(reply[1...4]) == [0, 0, 0, 0], "version 0: Version Negotiation")
        #expect(Array(reply[5...]) == [3] + scid + [8] + dcid + [0x1A, 0x2A, 0x3A, 0x4A])
        #expect(reply.count < 1200, "never larger than what it answers")
    }

    @Test("No answer to a datagram too short for an Initial, a short header, a Version Negotiation, or one cut short")
    func noAnswer() {
        #expect(refusal(Self.initial(dcid: [1], scid: [2], size: 1199)) == nil)
        var short = Self.initial(dcid: [1], scid: [2])
        short[0] = 0x43
        #expect(refusal(short) == nil)
        #expect(refusal(Self.initial(dcid: [1], scid: [2], version: 0)) == nil)
        let cut: [UInt8] = [0xC3, 0, 0, 0, 1, 40] + [UInt8](repeating: 7, count: 30)
        #expect(cut.withUnsafeBytes { QUICLongHeader(datagram: $0) } == nil)
        #expect([UInt8]().withUnsafeBytes { QUICLongHeader(datagram: $0) } == nil)
    }

    @Test("Every prefix of a header parses or is refused without trapping")
    func prefixes() {
        let datagram = Self.initial(dcid: Array(0..<20), scid: Array(0..<20), size: 0)
        for end in 0...datagram.count {
            let header = datagram[..<end].withUnsafeBytes { QUICLongHeader(datagram: $0) }
            #expect((header != nil) == (end == datagram.count))
        }
    }

    @Test("Attempts are counted once per connection ID, and a device's fallback reports them once")
    func counting() {
        let refusals = QUICRefusals()
        #expect(refusals.refused(client: "198.18.0.2", connectionID: [1]) == true, "the first: a notice")
        #expect(refusals.refused(client: "198.18.0.2", connectionID: [1]) == false, "the same attempt again")
        #expect(refusals.refused(client: "198.18.0.2", connectionID: [2]) == false)
        #expect(refusals.refused(client: "198.18.0.3", connectionID: [1]) == true, "another device")
        #expect(refusals.count == 3)
        #expect(refusals.fellBack(client: "198.18.0.2") == 2)
        #expect(refusals.fellBack(client: "198.18.0.2") == nil, "said once")
        #expect(refusals.refused(client: "198.18.0.2", connectionID: [3]) == true, "a new burst")
        #expect(refusals.count == 4)
    }
}
