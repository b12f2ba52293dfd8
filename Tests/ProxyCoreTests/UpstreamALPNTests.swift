import ATSPolicy
import Testing
import TLSCore
import HTTP2Core

@testable import ProxyCore

@Suite("ALPN: what the upstream is offered and what the client is answered")
struct UpstreamALPNTests {
    struct OfferCase: Sendable, CustomStringConvertible {
        var mode: UpstreamALPN
        var client: [String]
        var widened: Bool
        var expected: [String]
        var description: String { "\(mode) \(client)\(widened ? " widened" : "") → \(expected)" }
    }

    static let offers: [OfferCase] = [
        // mirror: the client's relayable protocols in its order; h2 alone also gets http/1.1, which the proxy can
        // translate to, so an HTTP/1.1-only origin does not refuse the handshake.
        OfferCase(mode: .mirror, client: ["h2", "http/1.1"], widened: false, expected: ["h2", "http/1.1"]),
        OfferCase(mode: .mirror, client: ["http/1.1"], widened: false, expected: ["http/1.1"]),
        OfferCase(mode: .mirror, client: ["h2"], widened: false, expected: ["h2", "http/1.1"]),
        OfferCase(mode: .mirror, client: ["spdy/3", "http/1.1"], widened: false, expected: ["http/1.1"]),
        OfferCase(mode: .mirror, client: [], widened: false, expected: []),
        // After no_application_protocol: both, the client's first.
        OfferCase(mode: .mirror, client: ["http/1.1"], widened: true, expected: ["http/1.1", "h2"]),
        OfferCase(mode: .mirror, client: [], widened: true, expected: ["h2", "http/1.1"]),
        // ios: what URLSession offers, whatever the client did.
        OfferCase(mode: .ios, client: ["http/1.1"], widened: false, expected: ["h2", "http/1.1"]),
        OfferCase(mode: .ios, client: [], widened: false, expected: ["h2", "http/1.1"]),
    ]

    @Test("The upstream's ALPN offer", arguments: offers)
    func upstreamOffer(_ c: OfferCase) {
        #expect(c.mode.upstreamOffer(clientOffer: c.client, widened: c.widened) == c.expected)
    }

    @Test("The client gets the upstream's choice when it offered it, else what it can speak (translated)",
          arguments: [
            (["h2", "http/1.1"], "h2", ["h2"]),
            (["h2", "http/1.1"], "http/1.1", ["http/1.1"]),
            (["h2", "http/1.1"], nil, ["http/1.1"]),
            (["h2"], "http/1.1", ["h2"]),
            (["h2"], nil, ["h2"]),
            (["http/1.1"], "h2", ["http/1.1"]),
            ([], "h2", []),
          ] as [([String], String?, [String])])
    func clientAnswer(_ offered: [String], _ upstream: String?, _ expected: [String]) {
        #expect(UpstreamALPN.clientAnswer(clientOffer: offered, upstreamChoice: upstream) == expected)
    }

    @Test("An origin refusing the mirrored offer with no_application_protocol is reconnected offering both protocols")
    func noApplicationProtocolRetry() throws {
        let env = try SessionHarness.environment(mappings: [try HostMapping(parsing: "good.test=127.0.0.1:9443")])
        let session = SessionHarness.session(env)
        _ = session.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        let client = try TLSEngine(context: try TLSContext(.client()), serverName: "good.test", alpn: ["http/1.1"])
        _ = client.handshake()
        #expect(session.handle(.clientBytes(client.takeOutput())).connects.count == 1)

        let first = try #require(try ClientHelloParser.parse(session.handle(.upstreamConnected).toUpstream))
        #expect(first.alpnProtocols == ["http/1.1"])
        // A fatal no_application_protocol (120) alert record, as nginx or a strict h2-only server sends it.
        let refused = session.handle(.upstreamBytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 120]))
        #expect(refused.contains(.closeUpstream))
        #expect(refused.connects.count == 1, "reconnected")
        #expect(!refused.closesClient)
        let second = try #require(try ClientHelloParser.parse(session.handle(.upstreamConnected).toUpstream))
        #expect(second.alpnProtocols == ["http/1.1", "h2"])
    }
}

/// Drives a session between an in-memory TLS client and in-memory TLS origins (no sockets).
private struct RetryScene {
    let env: ProxyEnvironment
    let session: ProxySession
    let client: TLSEngine

    init() throws {
        env = try SessionHarness.environment(
            mode: .off, mappings: [try HostMapping(parsing: "good.test=127.0.0.1:9443")], trustingOwnCA: true)
        session = SessionHarness.session(env)
        client = try TLSEngine(context: try TLSContext(.client()), serverName: "good.test", alpn: ["http/1.1"])
    }

    /// An origin for good.test choosing from `alpn` (none: it acknowledges no protocol).
    func origin(alpn: [String]) throws -> TLSEngine {
        let identity = try env.minter.identity(for: "good.test")
        return try TLSEngine(context: try TLSContext(.server(identity: identity, alpn: alpn)))
    }

    /// Runs the upstream handshake between the session and `origin` (bounded); returns what the session sent the
    /// client meanwhile.
    func upstreamHandshake(_ origin: TLSEngine, hello: [UInt8]) -> [UInt8] {
        var toOrigin = hello
        var toClient: [UInt8] = []
        for _ in 0..<10 where !toOrigin.isEmpty {
            origin.feed(toOrigin)
            _ = origin.handshake()
            let commands = session.handle(.upstreamBytes(origin.takeOutput()))
            toClient += commands.toClient
            toOrigin = commands.toUpstream
        }
        return toClient
    }

    /// Runs the client's handshake with the session (bounded), starting from what the session sent it.
    func clientHandshake(_ fromSession: [UInt8]) {
        var toClient = fromSession
        for _ in 0..<10 where !toClient.isEmpty {
            client.feed(toClient)
            _ = client.handshake()
            toClient = session.handle(.clientBytes(client.takeOutput())).toClient
        }
    }
}

@Suite("ALPN retry of an origin that closes HTTP/1.1-only offers")
struct ALPNRetryTests {
    @Test("A GET already sent when the origin closes is replayed, as HTTP/2, on the connection retried offering h2")
    func replaysRequestOnRetry() throws {
        let scene = try RetryScene()
        _ = scene.session.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        _ = scene.client.handshake()
        _ = scene.session.handle(.clientBytes(scene.client.takeOutput()))

        // The first origin acknowledges no protocol (like nghttpd offered only http/1.1) …
        let first = try scene.origin(alpn: [])
        let afterHandshake = scene.upstreamHandshake(first, hello: scene.session.handle(.upstreamConnected).toUpstream)
        scene.clientHandshake(afterHandshake)
        #expect(scene.client.negotiated?.alpn == "http/1.1")
        // … the client's request goes to it, and it closes without a byte of answer.
        try scene.client.write(bytes("GET /a HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        let sent = scene.session.handle(.clientBytes(scene.client.takeOutput()))
        #expect(!sent.toUpstream.isEmpty)
        let closed = scene.session.handle(.upstreamEOF)
        #expect(closed.contains(.closeUpstream))
        #expect(closed.connects.count == 1, "retried")
        #expect(!closed.closesClient)

        let hello = scene.session.handle(.upstreamConnected).toUpstream
        #expect(try ClientHelloParser.parse(hello)?.alpnProtocols == ["http/1.1", "h2"])
        let second = try scene.origin(alpn: ["h2"])
        _ = scene.upstreamHandshake(second, hello: hello)
        var plaintext: [UInt8] = []
        while case .data(let piece) = second.read() { plaintext += piece }
        #expect(plaintext.starts(with: bytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")), "the relay now speaks h2 upstream")
        let h2 = try H2Session(role: .server)
        let request = try h2.receive(plaintext).first { if case .headers = $0 { true } else { false } }
        guard case .headers(_, let fields, .request, _)? = request else {
            Issue.record("no request replayed: \(plaintext.count) bytes")
            return
        }
        #expect(fields.first(named: ":path") == "/a")
        #expect(fields.first(named: ":authority") == "good.test")
    }
}
