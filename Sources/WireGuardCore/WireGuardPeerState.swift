/// One peer's sessions and handshake memory, shared by the responder and the initiator.
///
/// Theory of operation: a peer has up to three sessions. `next` is a session a responder made by answering an
/// initiation: it must not send with it until the initiator proves it has the keys by sending on it (key
/// confirmation), at which point it becomes `current` and the old current becomes `previous` (kept so that
/// packets in flight under the old keys are still taken). An initiator's session is current at once. A session is
/// never used past REJECT_AFTER_TIME.
struct WireGuardPeerState {
    let publicKey: [UInt8]
    var current: WireGuardSession?
    var previous: WireGuardSession?
    var next: WireGuardSession?
    /// The greatest initiation timestamp taken, and when (monotonic), for replay and flood checks.
    var lastTimestamp = TAI64N.zero
    var lastInitiation: UInt64?
    /// For passive keepalives: when we last sent, and whether data arrived since.
    var lastSent: UInt64 = 0
    var receivedSinceSend = false

    init(publicKey: [UInt8]) { self.publicKey = publicKey }

    var indexes: [UInt32] { [current, previous, next].compactMap { $0?.localIndex } }

    /// Opens a transport message for one of this peer's sessions (the caller matched the index).
    mutating func receive(_ message: WireGuardMessage.Transport, now: UInt64, peer: Int) -> WireGuardReceipt {
        let result: Result<[UInt8], WireGuardDrop>
        if current?.localIndex == message.receiver {
            result = current!.open(message, now: now)
        } else if previous?.localIndex == message.receiver {
            result = previous!.open(message, now: now)
        } else if next?.localIndex == message.receiver {
            result = next!.open(message, now: now)
            if case .success = result {
                previous = current
                current = next
                next = nil
            }
        } else {
            return .dropped(.unknownIndex)
        }
        switch result {
        case .failure(let drop): return .dropped(drop)
        case .success(let plain) where plain.isEmpty: return .keepalive(peer: peer)
        case .success(let plain):
            receivedSinceSend = true
            return .packet(peer: peer, plain)
        }
    }

    /// The transport message carrying `packet` on the current session; nil without a usable one.
    mutating func send(_ packet: [UInt8], now: UInt64) -> [UInt8]? {
        guard let message = current?.seal(packet, now: now) else { return nil }
        lastSent = now
        receivedSinceSend = false
        return message
    }

    /// An empty keepalive when data came in and nothing went out for KEEPALIVE_TIMEOUT (the paper §6.5).
    mutating func keepaliveIfDue(now: UInt64) -> [UInt8]? {
        guard receivedSinceSend, now &- lastSent >= WireGuardLimits.keepaliveTimeout else { return nil }
        return send([], now: now)
    }

    /// Whether the initiator of the current session should start a new handshake (§6.2).
    func rekeyDue(now: UInt64) -> Bool {
        guard let current, current.isInitiator else { return current == nil }
        return now &- current.created >= WireGuardLimits.rekeyAfterTime
            || current.sendCounter >= WireGuardLimits.rekeyAfterMessages
    }
}
