import ATSPolicy
import Foundation
import ProxyTrace
import TLSCore
import Testing

@testable import ProxyCore

/// A flaw of the origin's leaf, the SSL code the app would fail with, and how the leaf `--block tls` serves the
/// client shows the same flaw.
struct LeafFlaw: Sendable, CustomStringConvertible {
    var name: String
    /// The origin's leaf, minted at the scene's time.
    var origin: @Sendable (Date) -> LeafOptions
    var sslCode: String
    /// Whether the leaf the client was served carries the flaw (checked at the scene's time).
    var served: @Sendable (CertificateFacts, Date) -> Bool
    var description: String { name }

    static let all: [LeafFlaw] = [
        LeafFlaw(name: "expired", origin: { .expired(now: $0) }, sslCode: "-9814", served: { $0.notAfter < $1 }),
        LeafFlaw(name: "wronghost", origin: { _ in .wrongHost() }, sslCode: "-9843",
                 served: { leaf, _ in !leaf.dnsNames.contains("good.test") && !leaf.dnsNames.isEmpty }),
        LeafFlaw(name: "selfsigned", origin: { _ in .selfSigned }, sslCode: "-9813",
                 served: { leaf, _ in leaf.issuer.contains("Untrusted") }),
        LeafFlaw(name: "sha1", origin: { _ in .sha1Signed }, sslCode: "-9802",
                 served: { leaf, _ in leaf.signatureHash == .sha1 }),
        LeafFlaw(name: "rsa1024", origin: { _ in .weakRSA }, sslCode: "-9802",
                 served: { leaf, _ in leaf.keyType == .rsa && leaf.keyBits == 1024 }),
    ]
}

@Suite("Playbooks: --block tls fails the client's own handshake the way the app's fails")
struct BlockTLSPlaybooks {
    @Test("A TLS 1.0-only origin: after the probe, the client's ClientHello is refused with protocol_version")
    func tls10() throws {
        let scene = try InterceptScene()
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(tls10: true), now: scene.now)
        pb.connects(scene)
        pb.probesTLS10Origin()
        pb >> .originFlight
        pb << .closeUpstream
        pb << .log(.exchange("CONNECT", "https://good.test", status: nil, .blocked, codes: "-1200/-9836"))
        pb << .sendToClient(.tlsAlert(.protocolVersion))
        pb << .closeClient
        pb.check()
        #expect(pb.client?.failure == .peerAlert(.protocolVersion))
        #expect(pb.client?.received == [], "no byte of the origin reaches the client")
    }

    @Test("A flawed origin leaf: the client is served a leaf with the same flaw, refuses it, and is closed",
          arguments: LeafFlaw.all)
    func flawedLeaf(_ flaw: LeafFlaw) throws {
        let scene = try InterceptScene()
        let at = Date(timeIntervalSince1970: scene.now)
        let pb = Playbook(
            scene.env, client: try scene.client(), origin: try scene.origin(leaf: flaw.origin(at)), now: scene.now)
        pb.connects(scene)
        pb >> .originFlight
        pb << .sendToUpstream(.tlsRecords)
        pb << .closeUpstream
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        let leaf = try #require(pb.client?.servedLeaf)
        #expect(flaw.served(leaf.facts, at), "\(leaf.facts)")
        if flaw.name == "wronghost" {
            // OpenSSL verifies no name: the handshake completes, and the client (as curl does) checks the name
            // itself and closes its side without a request (the session's TLS 1.3 tickets reach it first).
            pb >> .clientFlight
            pb << .sendToClient(.tlsRecords)
            pb >> .clientEOF
            pb << .sendToClient(.tlsRecords)  // close_notify
            pb << .log(.exchange("CONNECT", "https://good.test", status: nil, .blocked, codes: "-1202/\(flaw.sslCode)"))
            pb << .closeClient
        } else {
            pb >> .clientFlight
            pb << .log(.exchange("CONNECT", "https://good.test", status: nil, .blocked, codes: "-1202/\(flaw.sslCode)"))
            pb << .closeClient
            #expect(pb.client?.engine.lastAlertSent?.fatal == true)
        }
        pb.check()
        #expect(pb.client?.received == [])
    }
}
