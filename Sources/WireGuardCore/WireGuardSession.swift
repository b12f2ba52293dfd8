/// The limits of the WireGuard paper §6.1, in nanoseconds of the injected monotonic clock and in messages.
public enum WireGuardLimits {
    /// The initiator of a session starts a new handshake once its session is this old.
    public static let rekeyAfterTime: UInt64 = 120_000_000_000
    /// No packet is sent or taken with a session older than this.
    public static let rejectAfterTime: UInt64 = 180_000_000_000
    /// After this many messages the initiator rekeys.
    public static let rekeyAfterMessages: UInt64 = 1 << 60
    /// No counter at or above this is used or taken.
    public static let rejectAfterMessages: UInt64 = UInt64.max - (1 << 13)
    /// A peer that received data and sent nothing for this long sends an empty keepalive.
    public static let keepaliveTimeout: UInt64 = 10_000_000_000
    /// Initiations from one peer closer than this are dropped (wireguard-go's rate, 50 a second).
    public static let initiationInterval: UInt64 = 1_000_000_000 / 50
}

/// One set of transport keys: the result of a handshake, usable until it expires (`WireGuardLimits`).
struct WireGuardSession {
    /// Our index (the receiver index the other side writes in its transport messages) and theirs.
    var localIndex: UInt32
    var remoteIndex: UInt32
    var sendKey: [UInt8]
    var receiveKey: [UInt8]
    /// When the handshake completed, on the monotonic clock.
    var created: UInt64
    /// Whether we started the handshake (only the initiator rekeys on time).
    var isInitiator: Bool
    var sendCounter: UInt64 = 0
    var window = ReplayWindow()

    func expired(now: UInt64) -> Bool { now &- created >= WireGuardLimits.rejectAfterTime }

    /// A transport message carrying `packet` (zero-padded to 16 bytes), or nil when the session may send no more.
    mutating func seal(_ packet: [UInt8], now: UInt64) -> [UInt8]? {
        guard !expired(now: now), sendCounter < WireGuardLimits.rejectAfterMessages else { return nil }
        let padded = packet + [UInt8](repeating: 0, count: (16 - packet.count % 16) % 16)
        guard let body = WireGuardCrypto.seal(key: sendKey, counter: sendCounter, plaintext: padded, aad: []) else {
            return nil
        }
        defer { sendCounter += 1 }
        return [4, 0, 0, 0] + WireGuardMessage.le32(remoteIndex) + WireGuardMessage.le64(sendCounter) + body
    }

    /// The plaintext of a transport message for this session, or the reason it is dropped. The counter is taken
    /// only after the tag verified.
    mutating func open(_ message: WireGuardMessage.Transport, now: UInt64) -> Result<[UInt8], WireGuardDrop> {
        guard !expired(now: now) else { return .failure(.expiredSession) }
        guard message.counter < WireGuardLimits.rejectAfterMessages else { return .failure(.replayedCounter) }
        guard
            let plain = WireGuardCrypto.open(
                key: receiveKey, counter: message.counter, ciphertext: message.ciphertext, aad: [])
        else { return .failure(.undecryptable) }
        guard window.accept(message.counter) else { return .failure(.replayedCounter) }
        return .success(plain)
    }
}

/// Why a datagram was dropped (none is answered: WireGuard is silent to what it does not accept).
public enum WireGuardDrop: String, Error, Sendable, Equatable {
    /// Not a WireGuard message: wrong type, reserved bytes, or length.
    case malformed
    /// MAC1 does not match our key: not meant for this proxy.
    case badMAC1
    /// A handshake whose decryption or DH failed.
    case handshakeFailed
    /// A well-formed initiation from a static key that is not one of our peers.
    case unknownPeer
    /// An initiation whose timestamp is not after the peer's last one (a replay).
    case replayedInitiation
    /// An initiation too soon after the peer's last (flood).
    case initiationFlood
    /// A transport message for an index we do not have (an old or foreign session).
    case unknownIndex
    /// A transport message whose tag does not verify.
    case undecryptable
    /// A counter already taken, too old for the window, or past the message limit.
    case replayedCounter
    /// A transport message for a session past REJECT_AFTER_TIME.
    case expiredSession
    /// A message of the other role (a responder got a response or a cookie reply).
    case unexpected
}

/// What one received datagram amounts to.
public enum WireGuardReceipt: Equatable, Sendable {
    /// A handshake answered: send `response` back to the datagram's sender. `peer` indexes the configured peers.
    case handshake(peer: Int, response: [UInt8])
    /// The handshake (our initiation) completed.
    case established(peer: Int)
    /// An IP packet from the peer (padding not removed: the IP header's length says where it ends).
    case packet(peer: Int, [UInt8])
    /// An empty transport message: the peer's keepalive (or its session confirmation).
    case keepalive(peer: Int)
    case dropped(WireGuardDrop)
}
