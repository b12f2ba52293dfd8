/// The device's side of WireGuard with one peer (the proxy): it initiates handshakes and then sends and receives
/// transport messages. The proxy itself only responds; this side exists for the tests and for symmetry with the
/// responder, over the same handshake and session code.
public struct WireGuardInitiator: Sendable {
    public let keyPair: WireGuardKeyPair
    public let remoteStatic: [UInt8]
    var peer: WireGuardPeerState
    var pending: NoiseHandshake.InitiatorState?
    let random: @Sendable (Int) -> [UInt8]?

    public init(
        keyPair: WireGuardKeyPair, remoteStatic: [UInt8],
        random: @escaping @Sendable (Int) -> [UInt8]? = WireGuardCrypto.randomBytes
    ) {
        self.keyPair = keyPair
        self.remoteStatic = remoteStatic
        self.peer = WireGuardPeerState(publicKey: remoteStatic)
        self.random = random
    }

    /// A new initiation message stamped with the wall-clock `timestamp`; nil if randomness or DH fails.
    public mutating func initiate(timestamp: TAI64N) -> [UInt8]? {
        guard let ephemeral = random(32).flatMap(WireGuardKeyPair.init(privateKey:)), let index = random(4),
            let (message, state) = NoiseHandshake.initiate(
                local: keyPair, remoteStatic: remoteStatic, ephemeral: ephemeral,
                sender: WireGuardMessage.u32(index, 0), timestamp: timestamp)
        else { return nil }
        pending = state
        return message
    }

    /// Takes one datagram from the responder at `now`.
    public mutating func receive(_ datagram: [UInt8], now: UInt64) -> WireGuardReceipt {
        guard let message = WireGuardMessage(datagram) else { return .dropped(.malformed) }
        switch message {
        case .response(let response):
            guard let state = pending else { return .dropped(.unexpected) }
            guard
                let keys = NoiseHandshake.consumeResponse(
                    response, state: state, local: keyPair, remoteStatic: remoteStatic)
            else { return .dropped(.handshakeFailed) }
            pending = nil
            peer.previous = peer.current
            peer.current = WireGuardSession(
                localIndex: state.sender, remoteIndex: response.sender, sendKey: keys.send, receiveKey: keys.receive,
                created: now, isInitiator: true)
            return .established(peer: 0)
        case .transport(let transport):
            return peer.receive(transport, now: now, peer: 0)
        case .initiation, .cookieReply:
            return .dropped(.unexpected)
        }
    }

    /// The transport message carrying `packet` (empty: a keepalive); nil without a usable session.
    public mutating func send(_ packet: [UInt8], now: UInt64) -> [UInt8]? { peer.send(packet, now: now) }

    /// Whether a (new) handshake is due: no session yet, or REKEY_AFTER_TIME / REKEY_AFTER_MESSAGES reached.
    public func rekeyDue(now: UInt64) -> Bool { peer.rekeyDue(now: now) }
}
