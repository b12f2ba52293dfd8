import Testing

@testable import WireGuardCore

/// A proxy (responder) and a device (initiator) with fresh keys, on a clock the test moves.
final class Pair {
    let proxyKeys = WireGuardKeyPair.generate()!
    let deviceKeys = WireGuardKeyPair.generate()!
    var proxy: WireGuardResponder
    var device: WireGuardInitiator
    /// Monotonic nanoseconds and wall-clock nanoseconds since 1970.
    var now: UInt64 = 1_000_000_000
    var wall: UInt64 = 1_780_000_000_000_000_000

    init() {
        proxy = WireGuardResponder(keyPair: proxyKeys, peers: [deviceKeys.publicKey])
        device = WireGuardInitiator(keyPair: deviceKeys, remoteStatic: proxyKeys.publicKey)
    }

    func advance(seconds: Double) {
        now += UInt64(seconds * 1e9)
        wall += UInt64(seconds * 1e9)
    }

    func sendFromDevice(_ packet: [UInt8], now: UInt64) -> [UInt8]? { device.send(packet, now: now) }
    func sendFromProxy(_ packet: [UInt8], to peer: Int, now: UInt64) -> [UInt8]? {
        proxy.send(packet, to: peer, now: now)
    }

    func initiation() -> [UInt8] { device.initiate(timestamp: TAI64N(unixNanoseconds: wall))! }

    /// A full handshake, confirmed by the device's first keepalive.
    func connect() throws {
        let initiation = initiation()
        guard case .handshake(0, let response) = proxy.receive(initiation, now: now) else {
            Issue.record("no handshake")
            return
        }
        #expect(device.receive(response, now: now) == .established(peer: 0))
        let keepalive = try #require(sendFromDevice([], now: now))
        #expect(proxy.receive(keepalive, now: now) == .keepalive(peer: 0))
    }
}

@Suite("WireGuard handshake and transport")
struct WireGuardHandshakeTests {
    @Test("Initiator and responder agree on keys: packets pass both ways")
    func roundTrip() throws {
        let pair = Pair()
        let initiation = pair.initiation()
        #expect(initiation.count == 148)
        guard case .handshake(let peer, let response) = pair.proxy.receive(initiation, now: pair.now) else {
            Issue.record("initiation not answered")
            return
        }
        #expect(peer == 0 && response.count == 92)
        // Before the device proves it has the keys, the proxy has nothing to send with.
        #expect(pair.sendFromProxy([1, 2, 3], to: 0, now: pair.now) == nil)
        #expect(pair.device.receive(response, now: pair.now) == .established(peer: 0))

        let packet: [UInt8] = Array(0..<100)
        let sealed = try #require(pair.sendFromDevice(packet, now: pair.now))
        #expect(sealed.count == 16 + 112 + 16, "padded to 16 bytes")
        guard case .packet(0, let opened) = pair.proxy.receive(sealed, now: pair.now) else {
            Issue.record("packet not opened")
            return
        }
        #expect(Array(opened.prefix(100)) == packet && opened.dropFirst(100).allSatisfy { $0 == 0 })

        let back = try #require(pair.sendFromProxy([9, 8, 7], to: 0, now: pair.now))
        guard case .packet(0, let reply) = pair.device.receive(back, now: pair.now) else {
            Issue.record("reply not opened")
            return
        }
        #expect(reply.prefix(3) == [9, 8, 7])
    }

    @Test("A replayed initiation is refused; a later one is answered")
    func replayedInitiation() throws {
        let pair = Pair()
        let first = pair.initiation()
        guard case .handshake = pair.proxy.receive(first, now: pair.now) else {
            Issue.record("first initiation not answered")
            return
        }
        pair.advance(seconds: 1)
        #expect(pair.proxy.receive(first, now: pair.now) == .dropped(.replayedInitiation))
        // One stamped earlier than the last taken is a replay too, even if never seen.
        let earlier = pair.device.initiate(timestamp: TAI64N(unixNanoseconds: pair.wall - 5_000_000_000))!
        #expect(pair.proxy.receive(earlier, now: pair.now) == .dropped(.replayedInitiation))
        guard case .handshake = pair.proxy.receive(pair.initiation(), now: pair.now) else {
            Issue.record("a new initiation is refused")
            return
        }
    }

    @Test("Initiations closer than 1/50 s are dropped as a flood")
    func initiationFlood() {
        let pair = Pair()
        _ = pair.proxy.receive(pair.initiation(), now: pair.now)
        pair.advance(seconds: 0.005)
        #expect(pair.proxy.receive(pair.initiation(), now: pair.now) == .dropped(.initiationFlood))
    }

    @Test("A wrong MAC1 is dropped before any DH; an unknown device is refused")
    func macAndPeers() throws {
        let pair = Pair()
        var initiation = pair.initiation()
        initiation[120] ^= 0x01
        #expect(pair.proxy.receive(initiation, now: pair.now) == .dropped(.badMAC1))

        // Addressed to another proxy's key: its MAC1 is not ours.
        let other = WireGuardKeyPair.generate()!
        var stranger = WireGuardInitiator(keyPair: pair.deviceKeys, remoteStatic: other.publicKey)
        let misaddressed = stranger.initiate(timestamp: TAI64N(unixNanoseconds: pair.wall))!
        #expect(pair.proxy.receive(misaddressed, now: pair.now) == .dropped(.badMAC1))

        // A device whose key is not configured.
        var unknown = WireGuardInitiator(keyPair: other, remoteStatic: pair.proxyKeys.publicKey)
        let foreign = unknown.initiate(timestamp: TAI64N(unixNanoseconds: pair.wall))!
        #expect(pair.proxy.receive(foreign, now: pair.now) == .dropped(.unknownPeer))
    }

    @Test("A replayed transport message is dropped; reordered ones pass")
    func transportReplay() throws {
        let pair = Pair()
        try pair.connect()
        let a = try #require(pair.sendFromDevice([1], now: pair.now))
        let b = try #require(pair.sendFromDevice([2], now: pair.now))
        guard case .packet = pair.proxy.receive(b, now: pair.now), case .packet = pair.proxy.receive(a, now: pair.now)
        else {
            Issue.record("reordered packets not taken")
            return
        }
        #expect(pair.proxy.receive(a, now: pair.now) == .dropped(.replayedCounter))
        #expect(pair.proxy.receive(b, now: pair.now) == .dropped(.replayedCounter))
    }

    @Test("A session past REJECT_AFTER_TIME neither sends nor receives; the initiator rekeys after REKEY_AFTER_TIME")
    func expiry() throws {
        let pair = Pair()
        try pair.connect()
        #expect(!pair.device.rekeyDue(now: pair.now))
        pair.advance(seconds: 121)
        #expect(pair.device.rekeyDue(now: pair.now))
        #expect(pair.sendFromProxy([1], to: 0, now: pair.now) != nil)
        pair.advance(seconds: 60)
        let late = try #require(pair.sendFromDevice([1], now: pair.now - 60_000_000_000))
        #expect(pair.proxy.receive(late, now: pair.now) == .dropped(.expiredSession))
        #expect(pair.sendFromProxy([1], to: 0, now: pair.now) == nil)
        // A new handshake gives a new session.
        try pair.connect()
        #expect(pair.sendFromProxy([1], to: 0, now: pair.now) != nil)
    }

    @Test("Truncated, extended or garbled messages are dropped, never answered")
    func hostileInput() throws {
        let pair = Pair()
        let initiation = pair.initiation()
        for length in 0..<initiation.count {
            #expect(pair.proxy.receive(Array(initiation.prefix(length)), now: pair.now) == .dropped(.malformed))
        }
        #expect(pair.proxy.receive(initiation + [0], now: pair.now) == .dropped(.malformed))
        var reserved = initiation
        reserved[2] = 1
        #expect(pair.proxy.receive(reserved, now: pair.now) == .dropped(.malformed))
        for type: UInt8 in [0, 5, 255] {
            #expect(
                pair.proxy.receive([type, 0, 0, 0] + [UInt8](repeating: 0, count: 60), now: pair.now)
                    == .dropped(.malformed))
        }

        try pair.connect()
        let sealed = try #require(pair.sendFromDevice(Array(0..<40), now: pair.now))
        // Every single-bit flip past the type and reserved bytes is dropped.
        for bit in 32..<(sealed.count * 8) {
            var garbled = sealed
            garbled[bit / 8] ^= UInt8(1) << (bit % 8)
            guard case .dropped = pair.proxy.receive(garbled, now: pair.now) else {
                Issue.record("bit \(bit) flipped was taken")
                return
            }
        }
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let length = Int.random(in: 0...200, using: &generator)
            var noise = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if length >= 4 {
                noise[0] = UInt8.random(in: 1...4)
                noise[1] = 0
                noise[2] = 0
                noise[3] = 0
            }
            guard case .dropped = pair.proxy.receive(noise, now: pair.now) else {
                Issue.record("random bytes were taken")
                return
            }
        }
        // The genuine message still passes after all that.
        guard case .packet = pair.proxy.receive(sealed, now: pair.now) else {
            Issue.record("the genuine message is refused")
            return
        }
        // Messages of the initiator's role are not for the responder.
        #expect(
            pair.proxy.receive([2, 0, 0, 0] + [UInt8](repeating: 0, count: 88), now: pair.now) == .dropped(.unexpected))
        #expect(
            pair.proxy.receive([3, 0, 0, 0] + [UInt8](repeating: 0, count: 60), now: pair.now) == .dropped(.unexpected))
    }
}
