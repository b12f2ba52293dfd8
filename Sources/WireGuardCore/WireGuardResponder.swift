/// The proxy's side of WireGuard: it answers handshakes from its configured peers (the devices initiate) and turns
/// their transport messages into IP packets and IP packets back into transport messages. Sans-io: datagrams and a
/// monotonic time in nanoseconds go in, receipts and datagrams come out; the caller owns the socket and the clock
/// and sends each reply to the address the datagram came from (so a device that changes network is followed).
///
/// Theory of operation: an initiation is parsed (lengths first), its MAC1 checked against our key before any DH,
/// then decrypted; the static key it reveals must be a configured peer, its TAI64N timestamp must be after that
/// peer's last (replays refused) and not within 1/50 s of the last initiation taken (floods refused). The
/// response makes a `next` session, confirmed by the device's first transport message (`WireGuardPeerState`).
/// Transport messages are matched by receiver index, verified, then counted in the replay window. The responder
/// never rekeys on time (the initiator does, §6.2) but refuses sessions older than REJECT_AFTER_TIME. Cookies
/// (MAC2, message type 3) are neither sent nor required in this version: under a flood of initiations it does a
/// DH per initiation carrying a valid MAC1, which needs our public key.
public struct WireGuardResponder: Sendable {
    public let keyPair: WireGuardKeyPair
    var peers: [WireGuardPeerState]
    let random: @Sendable (Int) -> [UInt8]?

    /// A responder with static key `keyPair` that accepts the peers whose public keys are `peers` (a receipt's
    /// `peer` indexes this list). `random` supplies ephemeral keys and indexes (OpenSSL's CSPRNG by default).
    public init(
        keyPair: WireGuardKeyPair, peers: [[UInt8]],
        random: @escaping @Sendable (Int) -> [UInt8]? = WireGuardCrypto.randomBytes
    ) {
        self.keyPair = keyPair
        self.peers = peers.map(WireGuardPeerState.init(publicKey:))
        self.random = random
    }

    /// How many devices are configured.
    public var peerCount: Int { peers.count }

    /// The public key of peer `index`.
    public func peerKey(_ index: Int) -> [UInt8] { peers[index].publicKey }

    /// Takes one datagram received at `now` (monotonic nanoseconds).
    public mutating func receive(_ datagram: [UInt8], now: UInt64) -> WireGuardReceipt {
        guard let message = WireGuardMessage(datagram) else { return .dropped(.malformed) }
        switch message {
        case .initiation(let initiation): return answer(initiation, now: now)
        case .transport(let transport):
            guard let peer = peers.firstIndex(where: { $0.indexes.contains(transport.receiver) }) else {
                return .dropped(.unknownIndex)
            }
            return peers[peer].receive(transport, now: now, peer: peer)
        case .response, .cookieReply: return .dropped(.unexpected)
        }
    }

    /// The transport message carrying `packet` to peer `peer`; nil while it has no confirmed, unexpired session.
    public mutating func send(_ packet: [UInt8], to peer: Int, now: UInt64) -> [UInt8]? {
        peers[peer].send(packet, now: now)
    }

    /// The keepalives due at `now`, by peer (the paper's passive keepalive: data came in, nothing went out for 10 s).
    public mutating func keepalives(now: UInt64) -> [(peer: Int, datagram: [UInt8])] {
        peers.indices.compactMap { i in peers[i].keepaliveIfDue(now: now).map { (i, $0) } }
    }

    private mutating func answer(_ initiation: WireGuardMessage.Initiation, now: UInt64) -> WireGuardReceipt {
        guard
            WireGuardCrypto.constantTimeEqual(
                WireGuardCrypto.mac(key: NoiseHandshake.mac1Key(keyPair.publicKey), initiation.macked), initiation.mac1)
        else { return .dropped(.badMAC1) }
        guard let received = NoiseHandshake.consumeInitiation(initiation, local: keyPair) else {
            return .dropped(.handshakeFailed)
        }
        guard let peer = peers.firstIndex(where: { $0.publicKey == received.initiatorStatic }) else {
            return .dropped(.unknownPeer)
        }
        guard peers[peer].lastTimestamp < received.timestamp else { return .dropped(.replayedInitiation) }
        if let last = peers[peer].lastInitiation, now &- last < WireGuardLimits.initiationInterval {
            return .dropped(.initiationFlood)
        }
        guard let ephemeral = random(32).flatMap(WireGuardKeyPair.init(privateKey:)), let index = newIndex(),
            let response = NoiseHandshake.respond(to: received, ephemeral: ephemeral, sender: index)
        else { return .dropped(.handshakeFailed) }
        peers[peer].lastTimestamp = received.timestamp
        peers[peer].lastInitiation = now
        peers[peer].next = WireGuardSession(
            localIndex: index, remoteIndex: received.sender, sendKey: response.send, receiveKey: response.receive,
            created: now, isInitiator: false)
        return .handshake(peer: peer, response: response.message)
    }

    /// A random index no session of ours uses.
    private func newIndex() -> UInt32? {
        let used = Set(peers.flatMap(\.indexes))
        for _ in 0..<8 {
            guard let bytes = random(4) else { return nil }
            let index = WireGuardMessage.u32(bytes, 0)
            if !used.contains(index) { return index }
        }
        return nil
    }
}
