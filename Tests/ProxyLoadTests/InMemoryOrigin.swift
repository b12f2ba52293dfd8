import HTTP1Core
import TLSCore

@testable import atsproxy_load

/// A TLS origin in memory: a server `TLSEngine` presenting a certificate for `bench.test` (ALPN http/1.1) that
/// records the requests it reads. Tests carry its bytes to and from a `LoadConnection` by hand.
final class InMemoryOrigin {
    /// Minted once for all tests: a CA and a leaf for bench.test (the load client does not verify it anyway).
    private static let context = Result { () throws -> TLSContext in
        let minter = LeafMinter(authority: try CertificateAuthority.create(commonName: "atsproxy-load test CA"))
        return try TLSContext(.server(identity: try minter.identity(for: "bench.test"), alpn: ["http/1.1"]))
    }

    let engine: TLSEngine
    private var parser = HTTP1Parser(role: .requests)
    private(set) var requests: [HTTPRequestHead] = []

    init() throws {
        engine = try TLSEngine(context: try Self.context.get())
    }

    /// Feeds the client's ciphertext, advances the handshake, reads requests; returns the ciphertext to send back.
    func receive(_ ciphertext: [UInt8]) throws -> [UInt8] {
        engine.feed(ciphertext)
        if !engine.isHandshakeComplete, case .failed(let error) = engine.handshake() { throw error }
        if engine.isHandshakeComplete {
            reading: while true {
                switch engine.read() {
                case .data(let plaintext): parser.receive(plaintext)
                case .needsMoreInput, .closed: break reading
                case .failed(let error): throw error
                }
            }
            while true {
                switch try parser.nextEvent() {
                case .requestHead(let head): requests.append(head)
                case .paused: try parser.startNextMessage()
                default: return engine.takeOutput()
                }
            }
        }
        return engine.takeOutput()
    }

    /// Encrypts plaintext for the client.
    func send(_ plaintext: String) throws -> [UInt8] {
        try engine.write(Array(plaintext.utf8))
        return engine.takeOutput()
    }

    /// A close_notify alert for the client.
    func closeNotify() -> [UInt8] {
        engine.close()
        return engine.takeOutput()
    }
}

/// Feeds bytes to a load connection as one socket read.
func deliver(_ bytes: [UInt8], to connection: LoadConnection) -> LoadStep {
    bytes.withUnsafeBytes { connection.receive($0) }
}

func deliver(_ text: String, to connection: LoadConnection) -> LoadStep {
    deliver(Array(text.utf8), to: connection)
}

/// Carries handshake bytes both ways, starting with `clientBytes`, until the connection is ready (at most 10 flights).
func completeHandshake(_ connection: LoadConnection, with origin: InMemoryOrigin, clientBytes: [UInt8]) throws {
    var toOrigin = clientBytes
    for _ in 0..<10 where !toOrigin.isEmpty {
        let step = deliver(try origin.receive(toOrigin), to: connection)
        if let failure = step.failure { throw failure }
        toOrigin = step.output
    }
}

/// The recipe for `url`, sent through a proxy when `viaProxy`.
func recipe(_ url: String, viaProxy: Bool) throws -> ConnectionRecipe {
    try ConnectionRecipe(target: LoadTarget(url: url), viaProxy: viaProxy)
}

extension LoadStep {
    var outputText: String { String(decoding: output, as: UTF8.self) }
}
