import Testing

@testable import WireGuardCore

/// An IPv4 echo request from `source` to `destination` (what `ping` sends), checksums right.
func echoRequest(
    from source: [UInt8], to destination: [UInt8], identifier: UInt16 = 0x1234, data: [UInt8] = Array(0..<56)
)
    -> [UInt8]
{
    var icmp: [UInt8] = [8, 0, 0, 0, UInt8(identifier >> 8), UInt8(identifier & 0xFF), 0, 1] + data
    let checksum = TunnelPacket.internetChecksum(icmp[...])
    icmp[2] = UInt8(checksum >> 8)
    icmp[3] = UInt8(checksum & 0xFF)
    let header = IPv4Header(source: source, destination: destination, protocolNumber: 1, ttl: 64, identification: 7)
    return header.serialized(payloadLength: icmp.count) + icmp
}

@Suite("WireGuard tunnel IP layer")
struct TunnelIPLayerTests {
    let proxy: [UInt8] = [198, 19, 0, 1]
    let device: [UInt8] = [198, 19, 0, 2]
    var layer: TunnelIPLayer { TunnelIPLayer(address: proxy) }

    @Test("A ping to the proxy's tunnel address is answered: addresses swapped, same identifier and data")
    func echo() throws {
        let request = echoRequest(from: device, to: proxy)
        // WireGuard's padding after the packet is ignored.
        guard case .reply(let reply) = layer.handle(request + [0, 0, 0, 0]) else {
            Issue.record("no reply")
            return
        }
        guard case .success(.ipv4(let header, let payload)) = TunnelPacket.parse(reply) else {
            Issue.record("the reply does not parse")
            return
        }
        #expect(header.source == proxy && header.destination == device && header.protocolNumber == 1)
        #expect(payload.first == 0 && TunnelPacket.internetChecksum(payload) == 0)
        #expect(Array(payload.dropFirst(4)) == Array(request.dropFirst(24)))
    }

    @Test("A ping to another address, and ICMP other than echo, are dropped")
    func otherICMP() {
        guard case .dropped = layer.handle(echoRequest(from: device, to: [1, 1, 1, 1])) else {
            Issue.record("answered for an address not ours")
            return
        }
        var notEcho = echoRequest(from: device, to: proxy)
        notEcho[20] = 13
        guard case .dropped = layer.handle(notEcho) else {
            Issue.record("answered a non-echo")
            return
        }
    }

    @Test("TCP is handed up checked (with its addresses), UDP with its header; a bad TCP checksum is dropped")
    func transports() {
        let destination: [UInt8] = [93, 184, 216, 34]
        let segment = TCPSegment(
            sourcePort: 49152, destinationPort: 443, sequence: 500, acknowledgment: 0, flags: .syn, window: 65535,
            maximumSegmentSize: 1380)
        let tcp = segment.packet(from: device, to: destination, identification: 1)
        guard case .tcp(let parsed, let source, let to) = layer.handle(tcp + [0, 0, 0]) else {
            Issue.record("the TCP segment was not handed up: \(layer.handle(tcp))")
            return
        }
        #expect(parsed == segment && source == device && to == destination)

        var corrupt = tcp
        corrupt[20 + 4] ^= 0x01  // the sequence number: the TCP checksum no longer matches
        #expect(layer.handle(corrupt) == .dropped("malformed TCP segment (badChecksum)"))

        let udpHeader = IPv4Header(source: device, destination: proxy, protocolNumber: 17, ttl: 64, identification: 2)
        let udpPayload: [UInt8] = [0xC0, 0x01, 0x00, 0x35, 0x00, 0x0C, 0x00, 0x00, 1, 2, 3, 4]
        let udp = udpHeader.serialized(payloadLength: udpPayload.count) + udpPayload
        #expect(layer.handle(udp) == .udp(udpHeader, datagram: udp[20...]))
        let truncated = udpHeader.serialized(payloadLength: 4) + [0xC0, 0x01, 0x00, 0x35]
        #expect(layer.handle(truncated) == .dropped("truncated UDP header"))

        let gre = IPv4Header(source: device, destination: proxy, protocolNumber: 47, ttl: 64, identification: 3)
        #expect(layer.handle(gre.serialized(payloadLength: 4) + [0, 0, 0, 0]) == .dropped("IP protocol 47"))
    }

    @Test("Malformed headers are dropped: short, bad version, lengths, checksum, fragments; no input crashes")
    func malformed() {
        let good = echoRequest(from: device, to: proxy)
        for length in 0..<28 {
            guard case .dropped = layer.handle(Array(good.prefix(length))) else {
                Issue.record("a \(length)-byte prefix was taken")
                return
            }
        }
        var badChecksum = good
        badChecksum[10] ^= 0xFF
        #expect(TunnelPacket.parse(badChecksum) == .failure(.badChecksum))
        var badVersion = good
        badVersion[0] = 0x55
        #expect(TunnelPacket.parse(badVersion) == .failure(.badVersion))
        var longTotal = good
        longTotal[2] = 0xFF
        #expect(TunnelPacket.parse(longTotal) == .failure(.badTotalLength))
        var shortIHL = good
        shortIHL[0] = 0x44
        #expect(TunnelPacket.parse(shortIHL) == .failure(.badHeaderLength))
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5000 {
            var bytes = good
            for _ in 0..<Int.random(in: 1...6, using: &generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            _ = layer.handle(Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &generator))))
        }
    }
}
