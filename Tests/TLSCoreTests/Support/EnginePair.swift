import TLSCore

/// Moves bytes between a client and a server engine in memory until both finish or one fails (bounded).
struct EnginePair {
    let client: TLSEngine
    let server: TLSEngine

    /// Runs the handshake; returns both sides' last step.
    @discardableResult
    func handshake(maxRounds: Int = 20) -> (client: TLSEngine.HandshakeStep, server: TLSEngine.HandshakeStep) {
        var c = client.handshake()
        var s = TLSEngine.HandshakeStep.needsMoreInput
        for _ in 0..<maxRounds {
            server.feed(client.takeOutput())
            s = server.handshake()
            client.feed(server.takeOutput())
            c = client.handshake()
            let cDone = c != .needsMoreInput
            let sDone = s != .needsMoreInput
            if cDone && sDone && !client.hasOutput && !server.hasOutput { break }
            if case .failed = c, !client.hasOutput { server.feed([]); s = server.handshake(); break }
            if case .failed = s, !server.hasOutput { break }
        }
        return (c, s)
    }
}

/// A self-signed P-256 leaf for `localhost`/`127.0.0.1`, made with the openssl CLI.
func makeServerIdentity(in dir: TempDirectory, cn: String = "localhost", san: String = "DNS:localhost,IP:127.0.0.1")
    throws -> TLSConfiguration.ServerIdentity
{
    let key = dir.path("\(cn)-key.pem")
    let cert = dir.path("\(cn)-cert.pem")
    try runOpenSSL([
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out",
        cert, "-subj", "/CN=\(cn)", "-days", "30", "-addext", "subjectAltName=\(san)",
    ])
    return TLSConfiguration.ServerIdentity(
        chain: try Certificate.chain(pem: String(contentsOfFile: cert, encoding: .utf8)),
        key: try PrivateKey(pem: String(contentsOfFile: key, encoding: .utf8)))
}
