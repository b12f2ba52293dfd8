import ATSPolicy
import Foundation
import ProxyTrace
import RuleStage
import TLSCore
import Testing
import TrafficRules

@testable import ProxyCore

/// A scene whose rules are the given options (`--fault good.test=expired`), read as `run` reads them.
private func faultScene(_ options: [(String, String)], mode: ATSMode = .enforce) throws -> InterceptScene {
    try InterceptScene(mode: mode, rules: options.map { (option: $0.0, value: $0.1) })
}

/// The record of a connection a rule failed: the rule, the injected note, the app's error, no upstream.
private func injected(_ label: String, codes: String, status: Int? = nil, saying what: String)
    -> LogMatch
{
    .exchange("CONNECT https://good.test injected \(label) \(codes)") { e in
        e.method == "CONNECT" && e.url == "https://good.test" && e.status == status && e.outcome == .notEvaluated
            && e.errors.map(\.shortCode).joined(separator: ",") == codes
            && e.rules.first?.action == (label.hasPrefix("block") ? "block" : "fault")
            && e.rules.first?.note?.hasSuffix("(injected)") == true
            && (e.note ?? "").hasPrefix("injected by a rule, not the server's: \(label): \(what)")
            && e.consoleLine(colour: false).contains(" RULE [")
    }
}

@Suite("Playbooks: connection-point faults and blocks fail the client leg, never contacting the upstream")
struct FaultPlaybooks {
    @Test("--fault expired: the ClientHello is answered with an expired leaf, the client refuses it; no upstream")
    func expired() throws {
        let scene = try faultScene([("--fault", "good.test=expired")])
        let pb = Playbook(scene.env, client: try scene.client(), now: scene.now)
        pb >> .clientBytes(scene.connect)
        pb << .startTimer(.requestHead)
        pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        pb << .startTimer(.clientHello)
        pb >> .clientFlight
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        let leaf = try #require(pb.client?.servedLeaf)
        #expect(leaf.facts.notAfter < Date(timeIntervalSince1970: scene.now))
        #expect(leaf.facts.dnsNames == ["good.test"])
        pb >> .clientFlight
        pb << .log(injected("expired", codes: "-1202/-9814", saying: "the client refused the flawed server"))
        pb << .closeClient
        pb.check()
        #expect(pb.client?.engine.lastAlertSent?.fatal == true)
    }

    @Test("--fault tls1.0: a client that offers TLS 1.2 and up (as iOS under ATS) gets protocol_version")
    func tls10() throws {
        let scene = try faultScene([("--fault", "good.test=tls1.0")])
        var configuration = TLSConfiguration.client(alpn: ["http/1.1"])
        configuration.verifyPeer = true
        configuration.additionalTrustRoots = [scene.env.minter.authority.certificate]
        configuration.minimumVersion = .tls12
        let strict = try TLSEngine(context: try TLSContext(configuration), serverName: scene.host)
        let pb = Playbook(scene.env, client: strict, now: scene.now)
        pb >> .clientBytes(scene.connect)
        pb << .startTimer(.requestHead)
        pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        pb << .startTimer(.clientHello)
        pb >> .clientFlight
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsAlert(.protocolVersion))
        pb << .log(injected("tls1.0", codes: "-1200/-9836", saying: "the client refused the flawed server"))
        pb << .closeClient
        pb.check()
        #expect(pb.client?.failure == .peerAlert(.protocolVersion))
    }

    @Test("--fault pin-mismatch: a valid leaf from the proxy's CA whose key is not the proxy's usual leaf key")
    func pinMismatch() throws {
        let scene = try faultScene([("--fault", "good.test=pin-mismatch")])
        let pb = Playbook(scene.env, client: try scene.client(), now: scene.now)
        pb >> .clientBytes(scene.connect)
        pb << .startTimer(.requestHead)
        pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        pb << .startTimer(.clientHello)
        pb >> .clientFlight
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)  // the session's tickets
        // A client that does not pin accepts it; its request is answered by the proxy, not the server.
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToClient(.tls(.containing(["HTTP/1.1 502 Bad Gateway\r\n", "X-ATS-Injected-Fault: pin-mismatch\r\n"])))
        pb << .log(.exchange("GET https://good.test/ 502, the rule recorded") { e in
            e.url == "https://good.test/" && e.status == 502 && e.rules.map(\.action) == ["fault"]
                && e.errors.first?.shortCode == "-1202/-9886"
        })
        pb.check()
        let served = try #require(pb.client?.servedLeaf)
        let usual = try scene.env.minter.identity(for: "good.test", now: Date(timeIntervalSince1970: scene.now))
        #expect(served.facts.issuer == usual.chain[0].facts.issuer)
        #expect(served.facts.spkiSHA256Base64 != usual.chain[0].facts.spkiSHA256Base64)
    }

    @Test("--fault offline and --block-list =refuse: the CONNECT is answered 502, naming the injected failure",
          arguments: [("--fault", "good.test=offline", "offline", "-1009"),
                      ("--block-list", "good.test=refuse", "block refuse", "-1004")])
    func answeredConnect(_ option: String, _ value: String, _ label: String, _ code: String) throws {
        let scene = try faultScene([(option, value)])
        let pb = Playbook(scene.env, client: try scene.client(), now: scene.now)
        pb >> .clientBytes(scene.connect)
        pb << .startTimer(.requestHead)
        pb << .log(injected(label, codes: code, status: 502, saying: "the CONNECT was answered 502"))
        pb << .sendToClient(.containing([
            "HTTP/1.1 502 Bad Gateway\r\n", "X-ATS-Injected-Fault: \(label)\r\n",
            "ATSProxy: injected failure, not the server's",
        ]))
        pb << .closeClient
        pb.check()
    }

    @Test("--fault reset and --block-list HOST: the 200, then a reset at the ClientHello",
          arguments: [("--fault", "good.test=reset", "reset"), ("--block-list", "good.test", "block reset")])
    func reset(_ option: String, _ value: String, _ label: String) throws {
        let scene = try faultScene([(option, value)])
        let pb = Playbook(scene.env, client: try scene.client(), now: scene.now)
        pb >> .clientBytes(scene.connect)
        pb << .startTimer(.requestHead)
        pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        pb << .startTimer(.clientHello)
        pb >> .clientFlight
        pb << .log(injected(label, codes: "-1005", saying: "the connection was reset at the ClientHello"))
        pb << .resetClient
        pb.check()
    }

    @Test("--fault timeout: the ClientHello is never answered; the client-handshake deadline ends it")
    func timeout() throws {
        let scene = try faultScene([("--fault", "good.test=timeout")])
        let pb = Playbook(scene.env, client: try scene.client(), now: scene.now)
        pb >> .clientBytes(scene.connect)
        pb << .startTimer(.requestHead)
        pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        pb << .startTimer(.clientHello)
        pb >> .clientFlight
        pb << .startTimer(.clientHandshake)
        pb >> .clientBytes(Array("more".utf8))
        pb.advance(60)
        pb >> .timerFired(.clientHandshake)
        pb << .log(injected("timeout", codes: "-1001", saying: "the ClientHello was never answered; the proxy closed"))
        pb << .closeClient
        pb.check()
        #expect(pb.client?.received == [])
    }

    @Test("A fault for another host leaves this one alone: it is intercepted as always")
    func otherHost() throws {
        let scene = try faultScene([("--fault", "other.test=expired")])
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.check()
    }

    @Test("--mode transparent: the ClientHello's SNI names the host; offline (no CONNECT to answer) resets at once")
    func transparentOffline() throws {
        let scene = try faultScene([("--fault", "good.test=offline")])
        let session = SessionHarness.session(scene.env)
        _ = session.startTransparent(destinationAddress: "198.18.5.9", port: 443)
        let client = try scene.client()
        _ = client.handshake()
        let out = session.handle(.clientBytes(client.takeOutput()))
        #expect(out.connects.isEmpty)
        #expect(out.toClient.isEmpty)
        #expect(out.contains(.resetClient))
        let record = try #require(out.exchanges.first)
        #expect(record.url == "https://good.test" && record.errors.first?.shortCode == "-1009")
        #expect(record.note?.contains("no CONNECT to answer (transparent mode)") == true, "\(record.note ?? "")")
    }

    @Test("--mode transparent: an expired fault is served to the SNI's host, with no upstream connection")
    func transparentExpired() throws {
        let scene = try faultScene([("--fault", "good.test=expired")])
        let session = SessionHarness.session(scene.env)
        _ = session.startTransparent(destinationAddress: "198.18.5.9", port: 443)
        let client = try scene.client()
        _ = client.handshake()
        let out = session.handle(.clientBytes(client.takeOutput()))
        #expect(out.connects.isEmpty)
        #expect(!out.toClient.isEmpty, "the flawed server's hello")
        #expect(session.interception?.host == "good.test")
    }

    @Test("A client that sends no ClientHello after the CONNECT's 200 still leaves the injected failure's record")
    func noHello() throws {
        let scene = try faultScene([("--fault", "good.test=expired")])
        let pb = Playbook(scene.env, client: try scene.client(), now: scene.now)
        pb >> .clientBytes(scene.connect)
        pb << .startTimer(.requestHead)
        pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        pb << .startTimer(.clientHello)
        pb >> .clientEOF
        pb << .log(injected("expired", codes: "-1202/-9814", saying: "the client sent no ClientHello"))
        pb << .closeClient
        pb.check()
    }

    @Test("Plain http:// requests meet the connection point too: each by its URL's host, no upstream contacted",
          arguments: [
            ("--fault", "good.test=offline", "HTTP/1.1 502 Bad Gateway\r\n", "-1009"),
            ("--fault", "good.test=timeout", "HTTP/1.1 504 Gateway Timeout\r\n", "-1001"),
            ("--fault", "good.test=expired", "HTTP/1.1 502 Bad Gateway\r\n", "-1202/-9814"),
            ("--block-list", "good.test=refuse", "HTTP/1.1 502 Bad Gateway\r\n", "-1004"),
          ])
    func plain(_ option: String, _ value: String, _ statusLine: String, _ code: String) throws {
        // --ats annotate: the layer forwards cleartext (with a -1022 annotation), so the rule decides.
        let scene = try faultScene([(option, value)], mode: .annotate)
        let session = SessionHarness.session(scene.env)
        let out = session.handle(.clientBytes(Array("GET http://good.test/x HTTP/1.1\r\nHost: good.test\r\n\r\n".utf8)))
        #expect(out.connects.isEmpty)
        #expect(out.clientText.hasPrefix(statusLine), "\(out.clientText)")
        #expect(out.clientText.contains("X-ATS-Injected-Fault: "), "\(out.clientText)")
        let record = try #require(out.exchanges.first)
        #expect(record.url == "http://good.test/x" && record.rules.first?.action == (option == "--fault" ? "fault" : "block"))
        #expect(record.errors.first?.shortCode == code)
        // Another host on the same connection is forwarded as usual.
        let other = session.handle(.clientBytes(Array("GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n".utf8)))
        #expect(other.connects.map(\.0) == ["other.test"])
    }

    @Test("Plain http:// with --fault reset or a host block: the connection is reset, the request recorded")
    func plainReset() throws {
        let scene = try faultScene([("--block-list", "good.test")], mode: .annotate)
        let session = SessionHarness.session(scene.env)
        let out = session.handle(.clientBytes(Array("GET http://good.test/x HTTP/1.1\r\nHost: good.test\r\n\r\n".utf8)))
        #expect(out.connects.isEmpty)
        #expect(out.contains(.resetClient))
        #expect(out.exchanges.first?.errors.first?.shortCode == "-1005")
    }
}
