import ATSPolicy
import Foundation
import TLSCore
import Testing

@testable import ProxyCore

/// A host the app pins (NSPinnedDomains) is tunnelled, not intercepted (intercepting would break the pin); the pin
/// is checked on a side connection (a lane) whose handshake the playbook answers with the origin's leaf.
private struct PinScene {
    let env: ProxyEnvironment
    let identity: TLSConfiguration.ServerIdentity
    /// The SPKI hash of the leaf the origin serves.
    let served: String

    /// `pin`: the app's pin, given the hash of the leaf the origin serves.
    init(pin: (String) -> String) throws {
        let authority = try CertificateAuthority.create(commonName: "Pin Playbook CA")
        identity = try LeafMinter(authority: authority).identity(for: "pin.test")
        served = CertificateInspector.facts(identity.chain[0]).spkiSHA256Base64
        let entry = PlistValue.dictionary(PlistDictionary([(key: "SPKI-SHA256-BASE64", value: .string(pin(served)))]))
        let host = PlistValue.dictionary(PlistDictionary([(key: "NSPinnedLeafIdentities", value: .array([entry]))]))
        let pinned = PlistDictionary([(key: "pin.test", value: host)])
        let ats = PlistDictionary([(key: "NSPinnedDomains", value: .dictionary(pinned))])
        env = ProxyEnvironment(
            policy: ATSPolicy(atsDictionary: .dictionary(ats)), mode: .enforce, blockStyle: .tls,
            mappings: [try HostMapping(parsing: "pin.test=127.0.0.1:9443")], passthrough: [], credentials: nil,
            minter: LeafMinter(authority: authority),
            factsCollector: HandshakeFactsCollector(trust: try TrustEvaluator(
                useSystemRoots: false, userRoots: [authority.certificate])),
            diagnosticsLevel: 0, jsonEvents: false)
    }

    func origin() throws -> () throws -> TLSEngine {
        let context = try TLSContext(.server(identity: identity, alpn: []))
        return { try TLSEngine(context: context) }
    }
}

@Suite("Playbooks: the pin of a tunnelled NSPinnedDomains host is checked on a side connection")
struct PinCheckPlaybooks {
    static let lane = UpstreamLane(1)

    /// The CONNECT to a pinned host: tunnelled at once, with the side connection for the pin check opened beside it;
    /// the side connection's handshake ends the check (and closes it) while the tunnel runs.
    private func tunnelsAndChecks(_ pb: Playbook) {
        pb >> .clientBytes(bytes("CONNECT pin.test:443 HTTP/1.1\r\nHost: pin.test:443\r\n\r\n"))
        pb << .startTimer(.requestHead)
        pb << .log(.notice(containing: "pin.test:443: tunnelled without interception: the app pins it"))
        pb << .connectUpstream(address: "127.0.0.1", port: 9443)
        pb << .connectLane(Self.lane, address: "127.0.0.1", port: 9443)
        pb << .startTimer(.upstreamHandshake)
        pb >> .upstreamConnected
        pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        pb << .startTunnel
        pb >> .laneConnected(Self.lane)
        pb << .sendToLane(Self.lane, .tlsRecords)
        pb >> .laneFlight(Self.lane)
        pb << .sendToLane(Self.lane, .tlsRecords)
        pb << .closeLane(Self.lane)
    }

    @Test("A wrong pin: the tunnel is not blocked; its CONNECT line, once both ended, is a -1202/-9886 violation")
    func wrongPin() throws {
        let wrong = String(repeating: "A", count: 43) + "="
        let scene = try PinScene { _ in wrong }
        let pb = Playbook(scene.env, origin: try scene.origin())
        tunnelsAndChecks(pb)
        pb << .log(.notice(containing: "the server's key does not match the app's pin (NSPinnedDomains › pin.test): "
            + "served SPKI-SHA256: leaf \(scene.served)"))
        pb >> .tunnelClosed(fromClient: 10, toClient: 20)
        pb << .log(.exchange("CONNECT https://pin.test violation -1202/-9886, the hashes named") { e in
            e.method == "CONNECT" && e.outcome == .violation && e.errors.first?.shortCode == "-1202/-9886"
                && e.requestBytes == 10 && e.responseBytes == 20
                && e.note.map { note in
                    note.contains("PIN MISMATCH (checked on a side connection): served SPKI-SHA256: leaf \(scene.served)")
                        && note.contains("expected NSPinnedLeafIdentities \(wrong)")
                } == true
        })
        pb.check()
    }

    @Test("The right pin: the CONNECT line says the pin matches, with no violation and no notice")
    func rightPin() throws {
        let scene = try PinScene { $0 }
        let pb = Playbook(scene.env, origin: try scene.origin())
        tunnelsAndChecks(pb)
        pb >> .tunnelClosed(fromClient: 10, toClient: 20)
        pb << .log(.exchange("CONNECT https://pin.test not evaluated, pin matches") { e in
            e.method == "CONNECT" && e.outcome == .notEvaluated && e.errors.isEmpty
                && e.note?.hasSuffix("; pin matches (checked on a side connection)") == true
        })
        pb.check()
    }
}
