import ATSPolicy
import Foundation
import TLSCore
import Testing

@testable import ProxyCore

/// The pin check of a tunnelled NSPinnedDomains host, driven by events: the side connection is a lane whose TLS the
/// test answers with an in-memory origin.
@Suite("Pin check on a side connection, without sockets")
struct PinCheckSessionTests {
    private func environment(pin: String, authority: CertificateAuthority) throws -> ProxyEnvironment {
        let identity = PlistValue.dictionary(PlistDictionary([(key: "SPKI-SHA256-BASE64", value: .string(pin))]))
        let host = PlistValue.dictionary(PlistDictionary([(key: "NSPinnedLeafIdentities", value: .array([identity]))]))
        let ats = PlistDictionary([(key: "NSPinnedDomains", value: .dictionary(PlistDictionary([(key: "pin.test", value: host)])))])
        return ProxyEnvironment(
            policy: ATSPolicy(atsDictionary: .dictionary(ats)), mode: .enforce, blockStyle: .tls,
            mappings: [try HostMapping(parsing: "pin.test=127.0.0.1:9443")], passthrough: [], credentials: nil,
            minter: LeafMinter(authority: authority),
            factsCollector: HandshakeFactsCollector(trust: try TrustEvaluator(
                useSystemRoots: false, userRoots: [authority.certificate])),
            diagnosticsLevel: 1, jsonEvents: true)
    }

    /// Runs a CONNECT to pin.test whose tunnel ends before the side connection's handshake, then that handshake
    /// against an origin serving `identity`; returns the commands of the step that ended the check.
    private func check(pinning pin: (TLSConfiguration.ServerIdentity) -> String) throws
        -> (ended: [ProxyCommand], served: String)
    {
        let authority = try CertificateAuthority.create(commonName: "PinCheck CA")
        let identity = try LeafMinter(authority: authority).identity(for: "pin.test")
        let served = CertificateInspector.facts(identity.chain[0]).spkiSHA256Base64
        let env = try environment(pin: pin(identity), authority: authority)
        let session = SessionHarness.session(env)
        let connect = session.handle(.clientBytes(bytes("CONNECT pin.test:443 HTTP/1.1\r\nHost: pin.test:443\r\n\r\n")))
        let lane = try #require(connect.compactMap { c -> UpstreamLane? in
            if case .connectLane(let l, "127.0.0.1", 9443) = c { l } else { nil }
        }.first, "the side connection goes where --map sends the host: \(connect)")
        // The tunnel's bytes do not wait for the check; a tunnel that ends first is logged when the check ends.
        #expect(session.handle(.upstreamConnected).contains(.startTunnel))
        #expect(session.handle(.tunnelClosed(fromClient: 10, toClient: 20)).exchanges.isEmpty)
        #expect(session.awaitsSideCheck)
        let origin = try TLSEngine(context: try TLSContext(.server(identity: identity, alpn: [])))
        var commands = session.handle(.laneConnected(lane))
        for _ in 0..<10 {
            if commands.contains(.closeLane(lane)) { return (commands, served) }
            origin.feed(commands.flatMap { c -> [UInt8] in if case .sendToLane(_, let b) = c { b } else { [] } })
            _ = origin.handshake()
            commands = session.handle(.laneBytes(lane, origin.takeOutput()))
        }
        Issue.record("the side connection's handshake did not end")
        return ([], served)
    }

    @Test("A wrong pin: the tunnel's record is a violation with the hashes served and expected, traced and noticed")
    func wrongPin() throws {
        let wrong = String(repeating: "A", count: 43) + "="
        let (ended, served) = try check { _ in wrong }
        let exchange = try #require(ended.exchanges.first)
        #expect(exchange.outcome == .violation)
        #expect(exchange.errors.map(\.shortCode) == ["-1202/-9886"])
        #expect(exchange.requestBytes == 10 && exchange.responseBytes == 20)
        #expect(exchange.note?.contains("PIN MISMATCH (checked on a side connection): served SPKI-SHA256: leaf "
            + "\(served)") == true, "\(exchange.note ?? "")")
        #expect(exchange.note?.contains("expected NSPinnedLeafIdentities \(wrong)") == true)
        #expect(ended.notices.contains { $0.contains("does not match the app's pin") })
        let decision = try #require(ended.events.first { $0.kind == .atsDecision })
        #expect(decision.violations?.map(\.kind) == [.pinMismatch])
        #expect(decision.violations?.first?.explanation.contains(wrong) == true)
    }

    @Test("The right pin: the record says the pin matches, with no violation")
    func rightPin() throws {
        let (ended, _) = try check { CertificateInspector.facts($0.chain[0]).spkiSHA256Base64 }
        let exchange = try #require(ended.exchanges.first)
        #expect(exchange.outcome != .violation)
        #expect(exchange.note?.contains("; pin matches (checked on a side connection)") == true, "\(exchange.note ?? "")")
        #expect(ended.notices.isEmpty)
    }
}
