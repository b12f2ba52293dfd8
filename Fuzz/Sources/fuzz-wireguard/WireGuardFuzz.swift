import FuzzSupport
import WireGuardCore

// Input: [mode] payload. Everything a device can send the proxy's WireGuard port, and everything it can put inside
// the tunnel:
// - mode 0: the payload as a datagram to a responder whose one device has a confirmed session (so that transport
//   messages with a known index reach the AEAD and the window);
// - mode 1: the payload as an IP packet the device sends through that session (so the IP layer sees arbitrary
//   plaintext, past decryption), then the reply, if any, opened by the device;
// - mode 2: the payload cut into datagrams (a length byte before each) to the same responder in turn;
// - mode 3: the payload as a DNS query to the tunnel's responder (`TunnelDNS`), answered as a lookup would be;
// - mode 4: the payload as an IP packet parsed for UDP (`UDPDatagram`), its payload then to `TunnelDNS` as mode 3.
// Invariants: nothing crashes; a datagram that is not a well-formed initiation is never answered with a handshake;
// a DNS response echoes the query's id and question, fits 512 bytes, and its question parses back to the same; a
// refusal's reply is a bare header (or header and question); every reply wrapped by `TunnelPacket.udpPacket` parses
// back, checksums right, to the same bytes.

/// Fixed keys and a deterministic "random" source, so that runs reproduce.
private let proxyKeys = WireGuardKeyPair(privateKey: [UInt8](repeating: 1, count: 32))!
private let deviceKeys = WireGuardKeyPair(privateKey: [UInt8](repeating: 2, count: 32))!

private func counterRandom() -> @Sendable (Int) -> [UInt8]? {
    { count in (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ count) } }
}

/// A tunnel and a device with a confirmed session between them.
private func connected() -> (WireGuardTunnel, WireGuardInitiator) {
    var tunnel = WireGuardTunnel(
        responder: WireGuardResponder(keyPair: proxyKeys, peers: [deviceKeys.publicKey], random: counterRandom()),
        address: [198, 19, 0, 1], deviceAddresses: [[198, 19, 0, 2]])
    var device = WireGuardInitiator(keyPair: deviceKeys, remoteStatic: proxyKeys.publicKey, random: counterRandom())
    let initiation = device.initiate(timestamp: TAI64N(unixNanoseconds: 1_000_000_000))!
    guard let response = tunnel.receive(initiation, now: 1).replies.first else { fatalError("no handshake") }
    _ = device.receive(response, now: 1)
    _ = tunnel.receive(device.send([], now: 1)!, now: 1)
    return (tunnel, device)
}

private let start = connected()

func fuzzWireGuard(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    let mode = input.control() % 5
    // Value types: each input starts from a copy of the same connected pair, with no handshake per input.
    var (tunnel, device) = start
    switch mode {
    case 0:
        check(&tunnel, input.payload)
    case 1:
        guard let sealed = device.send(input.payload, now: 2) else { return 0 }
        // A ping's reply, a SYN's SYN-ACK or RST: every datagram for the device opens on it.
        for (_, reply) in tunnel.receive(sealed, now: 2).datagrams {
            guard case .packet = device.receive(reply, now: 2) else {
                invariant(false, "the proxy's reply does not open on the device")
                return 0
            }
        }
    case 3:
        dns(input.payload[...])
    case 4:
        let packet = input.payload
        guard case .success(.ipv4(let header, let segment)) = TunnelPacket.parse(packet),
            case .success(let datagram) = UDPDatagram.parse(header, segment: segment)
        else { return 0 }
        invariant(datagram.payload.count <= segment.count - 8, "a UDP payload past its segment")
        dns(datagram.payload)
    default:
        var rest = input.payload[...]
        while let length = rest.popFirst() {
            let datagram = Array(rest.prefix(Int(length)))
            rest = rest.dropFirst(Int(length))
            check(&tunnel, datagram)
        }
    }
    return 0
}

private func check(_ tunnel: inout WireGuardTunnel, _ datagram: [UInt8]) {
    let output = tunnel.receive(datagram, now: 2)
    if output.events.contains(where: { if case .handshake = $0 { true } else { false } }) || !output.replies.isEmpty {
        invariant(datagram.count == 148 && datagram.first == 1, "a handshake answered for a non-initiation")
    }
}

private let proxy: [UInt8] = [198, 19, 0, 1], device: [UInt8] = [198, 19, 0, 2]

/// A query through the DNS responder, the reply checked and wrapped in a packet to the device.
private func dns(_ payload: ArraySlice<UInt8>) {
    let reply: [UInt8]
    switch TunnelDNS.parseQuery(payload) {
    case .failure(let refusal):
        guard let refused = TunnelDNS.response(to: refusal) else {
            invariant(
                payload.count < 12 || payload[payload.startIndex + 2] & 0x80 != 0, "a query got no reply")
            return
        }
        invariant(refused.count == 12 + refusal.question.count, "a refusal's reply is not its header and question")
        invariant(refused[0...1] == payload.prefix(2), "a refusal's reply has another id")
        reply = refused
    case .success(let question):
        let answer: DNSAnswer
        switch TunnelDNS.action(for: question) {
        case .lookUp(let hostName):
            invariant(!hostName.isEmpty && question.type == TunnelDNS.typeA, "a lookup for \(hostName)")
            let count = Int(payload.last ?? 0) % 40
            answer = .addresses((0..<count).map { [10, 0, UInt8($0 / 7), UInt8($0 % 7)] })
        case .answer(let decided):
            answer = decided
        }
        reply = TunnelDNS.response(to: question, answer: answer)
        invariant(reply.count <= TunnelDNS.maximumResponse, "a response of \(reply.count) bytes")
        invariant(reply[0...1] == payload.prefix(2), "a response with another id")
        let end = 12 + question.wire.count
        invariant(reply[12..<end].elementsEqual(question.wire), "the question not echoed")
        // The echoed question, as a query again, parses to the same question.
        let again = Array(reply[0..<2]) + [question.recursionDesired ? 1 : 0, 0, 0, 1, 0, 0, 0, 0, 0, 0] + question.wire
        invariant((try? TunnelDNS.parseQuery(again[...]).get()) == question, "the echoed question parses otherwise")
    }
    let packet = TunnelPacket.udpPacket(
        from: proxy, fromPort: TunnelDNS.port, to: device, toPort: 5353, payload: reply, identification: 1)
    guard case .success(.ipv4(let header, let segment)) = TunnelPacket.parse(packet),
        case .success(let datagram) = UDPDatagram.parse(header, segment: segment)
    else {
        invariant(false, "a reply packet does not parse")
        return
    }
    invariant(datagram.payload.elementsEqual(reply) && datagram.destination == device, "a reply packet changed")
}
