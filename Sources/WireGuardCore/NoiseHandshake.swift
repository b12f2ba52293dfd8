/// WireGuard's handshake, `Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s` with WireGuard's prologue and MACs (the paper
/// §5.4.2–5.4.4), as pure functions of keys and messages.
///
/// Theory of operation: both sides run the same transcript. The chaining key C starts as HASH(construction), the
/// hash H as HASH(C ‖ identifier ‖ responder's static key). The initiation mixes the initiator's ephemeral key, the
/// DH of that with the responder's static (es) to encrypt the initiator's static key, then the static-static DH
/// (ss) to encrypt a TAI64N timestamp. The response mixes the responder's ephemeral key, ee, se and the preshared
/// key (zero here), and encrypts nothing, which proves the responder holds its key. KDF2(C, ε) then gives the two
/// transport keys, the first for initiator → responder. MAC1 (keyed by HASH("mac1----" ‖ receiver's static key))
/// lets a responder drop messages not meant for it before any DH; MAC2 (cookies, for load) is all zero: this
/// version never sends cookies and never asks for them.
enum NoiseHandshake {
    static let construction = Array("Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s".utf8)
    static let identifier = Array("WireGuard v1 zx2c4 Jason@zx2c4.com".utf8)
    static let labelMac1 = Array("mac1----".utf8)
    static let initialChainingKey = WireGuardCrypto.hash(construction)
    static let initialHash = WireGuardCrypto.hash(initialChainingKey, identifier)

    /// Chaining key and hash in the middle of a handshake.
    struct Transcript {
        var chainingKey: [UInt8]
        var hash: [UInt8]

        init(responderStatic: [UInt8]) {
            chainingKey = NoiseHandshake.initialChainingKey
            hash = WireGuardCrypto.hash(NoiseHandshake.initialHash, responderStatic)
        }

        mutating func mixHash(_ data: [UInt8]) { hash = WireGuardCrypto.hash(hash, data) }
        mutating func mixKey(_ input: [UInt8]) {
            chainingKey = WireGuardCrypto.kdf(1, key: chainingKey, input: input)[0]
        }
        /// Mixes a DH result into C and returns the key it yields.
        mutating func mixKeyAndKey(_ input: [UInt8]) -> [UInt8] {
            let out = WireGuardCrypto.kdf(2, key: chainingKey, input: input)
            chainingKey = out[0]
            return out[1]
        }
        /// The transport keys: (initiator → responder, responder → initiator).
        func transportKeys() -> (initiatorSend: [UInt8], responderSend: [UInt8]) {
            let out = WireGuardCrypto.kdf(2, key: chainingKey, input: [])
            return (out[0], out[1])
        }
    }

    /// The MAC1 key of a receiver with static public key `publicKey`.
    static func mac1Key(_ publicKey: [UInt8]) -> [UInt8] { WireGuardCrypto.hash(labelMac1, publicKey) }

    /// `macked` with its MAC1 and an all-zero MAC2 appended.
    static func appendMACs(_ macked: [UInt8], receiverStatic: [UInt8]) -> [UInt8] {
        macked + WireGuardCrypto.mac(key: mac1Key(receiverStatic), macked[...]) + [UInt8](repeating: 0, count: 16)
    }

    // MARK: Initiator

    /// What an initiator keeps between its initiation and the response.
    struct InitiatorState {
        var transcript: Transcript
        var ephemeral: WireGuardKeyPair
        var sender: UInt32
    }

    /// The initiation message (148 bytes) and the state to read the response with; nil on a DH failure.
    static func initiate(
        local: WireGuardKeyPair, remoteStatic: [UInt8], ephemeral: WireGuardKeyPair, sender: UInt32,
        timestamp: TAI64N
    ) -> (message: [UInt8], state: InitiatorState)? {
        var t = Transcript(responderStatic: remoteStatic)
        t.mixKey(ephemeral.publicKey)
        t.mixHash(ephemeral.publicKey)
        guard let es = WireGuardCrypto.dh(privateKey: ephemeral.privateKey, publicKey: remoteStatic) else { return nil }
        var key = t.mixKeyAndKey(es)
        guard let encryptedStatic = WireGuardCrypto.seal(key: key, counter: 0, plaintext: local.publicKey, aad: t.hash)
        else { return nil }
        t.mixHash(encryptedStatic)
        guard let ss = WireGuardCrypto.dh(privateKey: local.privateKey, publicKey: remoteStatic) else { return nil }
        key = t.mixKeyAndKey(ss)
        guard
            let encryptedTimestamp = WireGuardCrypto.seal(key: key, counter: 0, plaintext: timestamp.bytes, aad: t.hash)
        else { return nil }
        t.mixHash(encryptedTimestamp)
        let macked =
            [1, 0, 0, 0] + WireGuardMessage.le32(sender) + ephemeral.publicKey + encryptedStatic
            + encryptedTimestamp
        return (
            appendMACs(macked, receiverStatic: remoteStatic),
            InitiatorState(transcript: t, ephemeral: ephemeral, sender: sender)
        )
    }

    /// The transport keys (send, receive) from the response to `state`'s initiation; nil when it does not verify.
    static func consumeResponse(
        _ response: WireGuardMessage.Response, state: InitiatorState, local: WireGuardKeyPair, remoteStatic: [UInt8]
    ) -> (send: [UInt8], receive: [UInt8])? {
        guard response.receiver == state.sender,
            WireGuardCrypto.constantTimeEqual(
                WireGuardCrypto.mac(key: mac1Key(local.publicKey), response.macked), response.mac1)
        else { return nil }
        var t = state.transcript
        t.mixKey(response.ephemeral)
        t.mixHash(response.ephemeral)
        guard let ee = WireGuardCrypto.dh(privateKey: state.ephemeral.privateKey, publicKey: response.ephemeral),
            let se = WireGuardCrypto.dh(privateKey: local.privateKey, publicKey: response.ephemeral)
        else { return nil }
        t.mixKey(ee)
        t.mixKey(se)
        let (key, tau) = t.mixPSK()
        t.mixHash(tau)
        guard WireGuardCrypto.open(key: key, counter: 0, ciphertext: response.encryptedNothing[...], aad: t.hash) != nil
        else { return nil }
        let keys = t.transportKeys()
        return (keys.initiatorSend, keys.responderSend)
    }

    // MARK: Responder

    /// A verified initiation: who sent it, when, and the transcript to answer it with.
    struct ReceivedInitiation {
        var initiatorStatic: [UInt8]
        var timestamp: TAI64N
        var ephemeral: [UInt8]
        var sender: UInt32
        var transcript: Transcript
    }

    /// Checks MAC1 and decrypts an initiation addressed to `local`; nil when anything fails.
    static func consumeInitiation(_ message: WireGuardMessage.Initiation, local: WireGuardKeyPair)
        -> ReceivedInitiation?
    {
        guard
            WireGuardCrypto.constantTimeEqual(
                WireGuardCrypto.mac(key: mac1Key(local.publicKey), message.macked), message.mac1)
        else { return nil }
        var t = Transcript(responderStatic: local.publicKey)
        t.mixKey(message.ephemeral)
        t.mixHash(message.ephemeral)
        guard let es = WireGuardCrypto.dh(privateKey: local.privateKey, publicKey: message.ephemeral) else {
            return nil
        }
        var key = t.mixKeyAndKey(es)
        guard
            let initiatorStatic = WireGuardCrypto.open(
                key: key, counter: 0, ciphertext: message.encryptedStatic[...], aad: t.hash)
        else { return nil }
        t.mixHash(message.encryptedStatic)
        guard let ss = WireGuardCrypto.dh(privateKey: local.privateKey, publicKey: initiatorStatic) else { return nil }
        key = t.mixKeyAndKey(ss)
        guard
            let stamp = WireGuardCrypto.open(
                key: key, counter: 0, ciphertext: message.encryptedTimestamp[...], aad: t.hash),
            let timestamp = TAI64N(bytes: stamp)
        else { return nil }
        t.mixHash(message.encryptedTimestamp)
        return ReceivedInitiation(
            initiatorStatic: initiatorStatic, timestamp: timestamp, ephemeral: message.ephemeral,
            sender: message.sender,
            transcript: t)
    }

    /// The response message (92 bytes) and the transport keys (send, receive); nil on a DH failure.
    static func respond(
        to initiation: ReceivedInitiation, ephemeral: WireGuardKeyPair, sender: UInt32
    ) -> (message: [UInt8], send: [UInt8], receive: [UInt8])? {
        var t = initiation.transcript
        t.mixKey(ephemeral.publicKey)
        t.mixHash(ephemeral.publicKey)
        guard let ee = WireGuardCrypto.dh(privateKey: ephemeral.privateKey, publicKey: initiation.ephemeral),
            let se = WireGuardCrypto.dh(privateKey: ephemeral.privateKey, publicKey: initiation.initiatorStatic)
        else { return nil }
        t.mixKey(ee)
        t.mixKey(se)
        let (key, tau) = t.mixPSK()
        t.mixHash(tau)
        guard let nothing = WireGuardCrypto.seal(key: key, counter: 0, plaintext: [], aad: t.hash) else { return nil }
        t.mixHash(nothing)
        let macked =
            [2, 0, 0, 0] + WireGuardMessage.le32(sender) + WireGuardMessage.le32(initiation.sender)
            + ephemeral.publicKey + nothing
        let keys = t.transportKeys()
        return (appendMACs(macked, receiverStatic: initiation.initiatorStatic), keys.responderSend, keys.initiatorSend)
    }
}

extension NoiseHandshake.Transcript {
    /// psk2: KDF3 of C with the preshared key (all zero: this version has none); returns (key, τ).
    mutating func mixPSK() -> (key: [UInt8], tau: [UInt8]) {
        let out = WireGuardCrypto.kdf(3, key: chainingKey, input: [UInt8](repeating: 0, count: 32))
        chainingKey = out[0]
        return (out[2], out[1])
    }
}
