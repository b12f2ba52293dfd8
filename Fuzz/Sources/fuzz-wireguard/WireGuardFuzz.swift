import FuzzSupport
import WireGuardCore

// Input: [mode] payload. Everything a device can send the proxy's WireGuard port, and everything it can put inside
// the tunnel:
// - mode 0: the payload as a datagram to a responder whose one device has a confirmed session (so that transport
//   messages with a known index reach the AEAD and the window);
// - mode 1: the payload as an IP packet the device sends through that session (so the IP layer sees arbitrary
//   plaintext, past decryption), then the reply, if any, opened by the device;
// - mode 2: the payload cut into datagrams (a length byte before each) to the same responder in turn.
// Invariants: nothing crashes; a datagram that is not a well-formed initiation is never answered with a handshake.

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
    let mode = input.control() % 3
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
