import ATSPolicy
import TLSCore

/// One end of an in-memory TLS connection to a session: the app's client, or an origin. A real `TLSEngine`:
/// what the session sends it is fed in and stepped at once (handshake, then reads), so the playbook can ask what
/// the peer decrypted, what failed, and what it would send next.
final class TLSPeer {
    let name: String
    let engine: TLSEngine
    /// Plaintext decrypted so far.
    private(set) var received: [UInt8] = []
    /// Why the peer's handshake or a read failed, if it did.
    private(set) var failure: TLSError?
    /// The session closed this connection (`closeClient` / `closeUpstream`).
    var closedBySession = false
    /// What arrived before the peer started TLS (a client's answer to its CONNECT).
    private(set) var cleartext: [UInt8] = []
    /// A client starts TLS when it sends its first flight, after the proxy answered the CONNECT in the clear.
    private var tlsStarted: Bool

    /// `startsInClear`: the peer reads cleartext until it sends its first TLS flight (a client behind CONNECT).
    init(_ name: String, engine: TLSEngine, startsInClear: Bool = false) {
        self.name = name
        self.engine = engine
        tlsStarted = !startsInClear
    }


    var receivedText: String { String(decoding: received, as: UTF8.self) }

    /// The leaf the peer was served (the first certificate of the chain), once the handshake got that far.
    var servedLeaf: Certificate? { engine.peerCertificateChain.first }

    /// Feeds what the session sent and steps the engine; returns the plaintext this delivery yielded.
    @discardableResult
    func deliver(_ ciphertext: [UInt8]) -> [UInt8] {
        guard tlsStarted else {
            cleartext += ciphertext
            return []
        }
        engine.feed(ciphertext)
        return step()
    }

    /// The end of the stream from the session (its FIN or close).
    func deliverEnd() {
        guard tlsStarted else { return }
        engine.feedEndOfInput()
        _ = step()
    }

    private func step() -> [UInt8] {
        guard failure == nil else { return [] }
        if !engine.isHandshakeComplete {
            switch engine.handshake() {
            case .needsMoreInput: return []
            case .failed(let error):
                failure = error
                return []
            case .complete: break
            }
        }
        var got: [UInt8] = []
        reading: while true {
            switch engine.read() {
            case .data(let piece): got += piece
            case .needsMoreInput, .closed: break reading
            case .failed(let error):
                failure = error
                break reading
            }
        }
        received += got
        return got
    }

    /// What the peer sends next: its pending handshake flight or records (stepping the handshake first, so a
    /// client's first call yields its ClientHello).
    func flight() -> [UInt8] {
        tlsStarted = true
        if !engine.isHandshakeComplete, failure == nil {
            if case .failed(let error) = engine.handshake() { failure = error }
        }
        return engine.takeOutput()
    }

    /// Encrypts `plaintext` and returns the records, with anything the engine still had pending before them.
    func sends(_ plaintext: [UInt8]) throws(TLSError) -> [UInt8] {
        tlsStarted = true
        try engine.write(plaintext)
        return engine.takeOutput()
    }

    /// A close_notify (and whatever was pending before it).
    func closeNotify() -> [UInt8] {
        engine.close()
        return engine.takeOutput()
    }
}
