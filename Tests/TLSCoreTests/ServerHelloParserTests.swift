import ATSPolicy
import Testing
import TLSCore

/// Real first flights from OpenSSL servers in memory, parsed as a tunnel sees them.
@Suite("ServerHelloParser")
struct ServerHelloParserTests {
    let dir: TempDirectory
    let identity: TLSConfiguration.ServerIdentity

    init() throws {
        dir = try TempDirectory()
        identity = try makeServerIdentity(in: dir)
    }

    /// The server's first flight in answer to the client's hello.
    func firstFlight(client: TLSConfiguration = .client(), server: TLSConfiguration? = nil) throws -> [UInt8] {
        let c = try TLSEngine(context: TLSContext(client), serverName: "localhost")
        let s = try TLSEngine(context: TLSContext(server ?? .server(identity: identity)))
        _ = c.handshake()
        s.feed(c.takeOutput())
        _ = s.handshake()
        return s.takeOutput()
    }

    func hello(_ bytes: [UInt8]) throws -> ServerHello {
        let answer = try ServerHelloParser.parse(bytes)
        guard case .hello(let hello)? = answer else { throw NoHello(answer: answer) }
        return hello
    }

    struct NoHello: Error { var answer: ServerAnswer? }

    @Test("TLS 1.3: the version comes from supported_versions, with the suite chosen")
    func tls13() throws {
        let h = try hello(try firstFlight())
        #expect(h.legacyVersion == 0x0303)
        #expect(h.selectedVersion == 0x0304)
        #expect(h.version == .tls13)
        #expect(h.cipherSuite == 0x1302)
        #expect(!h.isHelloRetryRequest)
    }

    @Test("TLS 1.2 and TLS 1.0: legacy_version is the version")
    func olderVersions() throws {
        var client = TLSConfiguration.client()
        client.maximumVersion = .tls12
        let tls12 = try hello(try firstFlight(client: client))
        #expect(tls12.version == .tls12)
        #expect(tls12.selectedVersion == nil)
        #expect(tls12.cipherSuite == 0xC02C || tls12.cipherSuite == 0xC02B)  // ECDHE-ECDSA with AES-GCM
        client = TLSConfiguration.client()
        client.minimumVersion = .tls10
        client.maximumVersion = .tls10
        client.securityLevel = 0
        var server = TLSConfiguration.server(identity: identity)
        server.minimumVersion = .tls10
        server.maximumVersion = .tls10
        server.securityLevel = 0
        let tls10 = try hello(try firstFlight(client: client, server: server))
        #expect(tls10.version == .tls10)
    }

    @Test("A HelloRetryRequest is recognised, and already names the version and suite")
    func helloRetryRequest() throws {
        var client = TLSConfiguration.client()
        client.groups = ["P-256", "X25519"]
        var server = TLSConfiguration.server(identity: identity)
        server.groups = ["X25519"]
        let h = try hello(try firstFlight(client: client, server: server))
        #expect(h.isHelloRetryRequest)
        #expect(h.version == .tls13)
    }

    @Test("A server that refuses the hello answers with an alert, read as such")
    func alert() throws {
        var client = TLSConfiguration.client()
        client.maximumVersion = .tls12
        var server = TLSConfiguration.server(identity: identity)
        server.minimumVersion = .tls13
        let flight = try firstFlight(client: client, server: server)
        #expect(try ServerHelloParser.parse(flight) == .alert(.protocolVersion))
    }

    @Test("Byte by byte: nothing until the ServerHello is whole, then the same answer")
    func incremental() throws {
        let flight = try firstFlight()
        let whole = try ServerHelloParser.parse(flight)
        var seen: [UInt8] = []
        var first: Int?
        for (index, byte) in flight.enumerated() where first == nil {
            seen.append(byte)
            if try ServerHelloParser.parse(seen) != nil { first = index }
        }
        #expect(first.map { $0 < flight.count } == true)
        #expect(try ServerHelloParser.parse(seen) == whole)
    }

    @Test("Bytes that are not a TLS server's say so", arguments: [
        (Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8), TLSHelloError.Kind.notTLS),
        ([0x16, 0x03, 0x03, 0x00, 0x04, 0x01, 0x00, 0x00, 0x00], .unexpectedMessage),
        ([0x16, 0x03, 0x03, 0x00, 0x06, 0x02, 0x00, 0x00, 0x02, 0x03, 0x03], .malformed),
    ] as [([UInt8], TLSHelloError.Kind)])
    func garbage(bytes: [UInt8], kind: TLSHelloError.Kind) {
        #expect { try ServerHelloParser.parse(bytes) } throws: { ($0 as? TLSHelloError)?.kind == kind }
    }
}
