import ATSPolicy
import Testing
import TLSCore

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
