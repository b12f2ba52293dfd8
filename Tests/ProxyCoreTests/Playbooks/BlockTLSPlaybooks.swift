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
            pb << .log(.exchange("CONNECT", "https://good.test", status: nil, .blocked, codes: "-1202/\(flaw.sslCode)"))
            pb << .sendToClient(.tlsRecords)  // close_notify
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

    @Test("A flaw the client's TLS library does not check: it takes the leaf, and its request gets the 502 fallback",
          arguments: [
            ("valid for 900 days", PolicyOptions()),
            ("without the serverAuth EKU", PolicyOptions(userRootEKU: .documentedStrict)),
          ] as [(String, PolicyOptions)])
    func fallback(_ flaw: String, _ options: PolicyOptions) throws {
        let scene = try InterceptScene(options: options)
        let at = Date(timeIntervalSince1970: scene.now)
        let leaf = flaw.hasPrefix("valid")
            ? LeafOptions(notBefore: at.addingTimeInterval(-86_400), notAfter: at.addingTimeInterval(900 * 86_400))
            : LeafOptions(includeServerAuthEKU: false)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(leaf: leaf), now: scene.now)
        pb.connects(scene)
        pb >> .originFlight
        pb << .sendToUpstream(.tlsRecords)
        pb << .closeUpstream
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .log(.notice(containing: "--block tls fell back to answering requests 502: the client accepted the "
            + "flawed leaf (\(flaw))"))
        pb << .sendToClient(.tls(.containing([
            "HTTP/1.1 502 Bad Gateway\r\n", "X-ATS-Error: -1202 NSURLErrorServerCertificateUntrusted\r\n",
            "Why an HTTP answer rather than a failed TLS handshake (--block tls): this client accepted the proxy's "
                + "certificate although it carries the server's flaw (\(flaw))",
        ])))
        pb << .log(.exchange("GET https://good.test/ 502 blocked, the fallback named") { e in
            e.url == "https://good.test/" && e.status == 502 && e.outcome == .blocked
                && e.consoleLine(colour: false).hasSuffix(
                    "(--block tls fallback: the client accepted the flawed leaf (\(flaw)): its TLS library does not "
                        + "check that, or its checks are off)")
        })
        // The connection was not refused in its handshake: it ends with no CONNECT line of its own.
        pb >> .clientCloseNotify
        pb << .sendToClient(.tlsRecords)
        pb << .closeClient
        pb.check()
        #expect(pb.client?.failure == nil)
    }

    @Test("A client that accepts any leaf (curl -k) still gets no origin content: the block answer, no CONNECT line")
    func insecureClient() throws {
        let scene = try InterceptScene()
        let at = Date(timeIntervalSince1970: scene.now)
        let pb = Playbook(
            scene.env, client: try scene.insecureClient(), origin: try scene.origin(leaf: .expired(now: at)),
            now: scene.now)
        pb.connects(scene)
        pb >> .originFlight
        pb << .sendToUpstream(.tlsRecords)
        pb << .closeUpstream
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .log(.notice(containing: "the client accepted the flawed leaf (expired)"))
        pb << .sendToClient(.tls(.containing([
            "HTTP/1.1 502 Bad Gateway\r\n", "X-ATS-Error: -1202 NSURLErrorServerCertificateUntrusted\r\n",
            "X-ATS-SSL-Error: -9814 ",
        ])))
        pb << .log(.exchange("GET https://good.test/ 502 blocked -1202/-9814, the fallback named") { e in
            e.url == "https://good.test/" && e.status == 502 && e.errors.first?.shortCode == "-1202/-9814"
                && e.consoleLine(colour: false).hasSuffix("its TLS library does not check that, or its checks are off)")
        })
        pb >> .clientCloseNotify
        pb << .sendToClient(.tlsRecords)
        pb << .closeClient
        pb.check()
        #expect(pb.client?.failure == nil)
        let served = try #require(pb.client?.servedLeaf?.facts)
        #expect(served.notAfter < at, "the client was served an expired leaf")
    }
}
