import HTTP1Core
import ProxyTrace
import TLSCore
import Testing

@testable import ProxyCore

/// `--mode transparent`: a session started at a redirected connection's original destination, as the adapter starts
/// it after reading SO_ORIGINAL_DST.
@Suite("Transparent sessions")
struct TransparentSessionTests {
    static let destination = "198.18.5.9"

    /// A session started transparently at `destination:port`, and what starting it asked for.
    private func transparent(_ env: ProxyEnvironment, port: Int = 443) -> (ProxySession, [ProxyCommand]) {
        let session = SessionHarness.session(env)
        return (session, session.startTransparent(destinationAddress: Self.destination, port: port))
    }

    private func hello(_ serverName: String?) throws -> [UInt8] {
        let client = try TLSEngine(context: try TLSContext(.client()), serverName: serverName)
        _ = client.handshake()
        return client.takeOutput()
    }

    @Test("Starting sends nothing and waits for the ClientHello under --client-timeout")
    func startWaits() throws {
        let (_, out) = transparent(try SessionHarness.environment())
        #expect(out.toClient.isEmpty)
        #expect(out.contains(.startTimer(.clientHello, after: .seconds(30))))
    }

    @Test("A ClientHello is intercepted by its SNI and the upstream is the original destination, not the name")
    func tlsToOriginalDestination() throws {
        let (session, _) = transparent(try SessionHarness.environment())
        let out = session.handle(.clientBytes(try hello("good.test")))
        #expect(out.connects.map { "\($0.0):\($0.1)" } == ["\(Self.destination):443"])
        #expect(out.toClient.isEmpty, "no 200: the client never sent a CONNECT")
        #expect(session.interception?.host == "good.test")
    }

    @Test("No SNI: the destination address names the host, as a CONNECT's host does")
    func tlsWithoutSNI() throws {
        let (session, _) = transparent(try SessionHarness.environment())
        _ = session.handle(.clientBytes(try hello(nil)))
        #expect(session.interception?.host == Self.destination)
    }

    @Test("--map names the host: the upstream is the mapping's, not the original destination")
    func mapWins() throws {
        let env = try SessionHarness.environment(mappings: [try HostMapping(parsing: "good.test=127.0.0.1:9443")])
        let (session, _) = transparent(env)
        let out = session.handle(.clientBytes(try hello("good.test")))
        #expect(out.connects.map { "\($0.0):\($0.1)" } == ["127.0.0.1:9443"])
    }

    @Test("A --passthrough host, named by its SNI, is tunnelled to the destination with the hello replayed")
    func passthroughBySNI() throws {
        let (session, _) = transparent(try SessionHarness.environment(passthrough: [".pass.test"]))
        let helloBytes = try hello("api.pass.test")
        let out = session.handle(.clientBytes(helloBytes))
        #expect(out.connects.map { "\($0.0):\($0.1)" } == ["\(Self.destination):443"])
        #expect(out.notices.contains { $0.contains("api.pass.test:443: tunnelled without interception (--pass") })
        #expect(session.interception == nil)
        let connected = session.handle(.upstreamConnected)
        #expect(connected.toUpstream == helloBytes)
        #expect(connected.toClient.isEmpty, "no 200 for a client that sent no CONNECT")
        #expect(connected.contains(.startTunnel))
    }

    @Test("One of Apple's pinned hosts, named by its SNI, is tunnelled untouched")
    func appleHostBySNI() throws {
        let (session, _) = transparent(try SessionHarness.environment())
        let out = session.handle(.clientBytes(try hello("gsa.apple.com")))
        #expect(out.notices.contains { $0.contains("gsa.apple.com:443: tunnelled without interception: Apple's own") })
        #expect(session.interception == nil)
    }

    @Test("Origin-form HTTP is judged by its Host: -1022 under Apple's defaults, logged with the absolute URL")
    func cleartextBlocked() throws {
        let (session, _) = transparent(try SessionHarness.environment(), port: 80)
        let out = session.handle(.clientBytes(bytes("GET /x HTTP/1.1\r\nHost: plain.test\r\n\r\n")))
        #expect(out.clientText.hasPrefix("HTTP/1.1 403"))
        #expect(out.clientText.contains("-1022"))
        #expect(out.connects.isEmpty)
        #expect(out.exchanges.first?.url == "http://plain.test/x")
    }

    @Test("Allowed cleartext goes to the original destination in origin form, Host kept; no proxy credentials owed")
    func cleartextRelayed() throws {
        let env = try SessionHarness.environment(
            exceptionAllowingHTTP: "plain.test", credentials: try ProxyCredentials(parsing: "u:p"))
        let (session, _) = transparent(env, port: 80)
        let out = session.handle(.clientBytes(bytes("GET /x HTTP/1.1\r\nHost: plain.test\r\n\r\n")))
        #expect(!out.clientText.contains("407"))
        #expect(out.connects.map { "\($0.0):\($0.1)" } == ["\(Self.destination):80"])
        let connected = session.handle(.upstreamConnected)
        #expect(connected.upstreamText.hasPrefix("GET /x HTTP/1.1\r\n"))
        #expect(connected.upstreamText.contains("Host: plain.test\r\n"))
    }

    @Test("Without Host the destination stands in, with its port when not 80")
    func absoluteFormWithoutHost() throws {
        let (session, _) = transparent(try SessionHarness.environment(), port: 8080)
        let head = HTTPRequestHead(method: "GET", target: "/a", version: .http1_0, headers: [])
        #expect(session.absoluteForm(head).target == "http://\(Self.destination):8080/a")
        var named = head
        named.headers.add(name: "Host", value: "plain.test")
        #expect(session.absoluteForm(named).target == "http://plain.test:8080/a")
        named.headers.replaceOrAdd(name: "Host", value: "[2001:db8::1]")
        #expect(session.absoluteForm(named).target == "http://[2001:db8::1]:8080/a")
    }

    @Test("Neither TLS nor HTTP: relayed raw to the destination")
    func otherProtocolTunnelled() throws {
        let (session, _) = transparent(try SessionHarness.environment(), port: 22)
        let out = session.handle(.clientBytes(bytes("SSH-2.0-OpenSSH_9.2\r\n")))
        #expect(out.connects.map { "\($0.0):\($0.1)" } == ["\(Self.destination):22"])
        #expect(out.notices.contains { $0.contains("neither TLS nor HTTP") })
        #expect(session.handle(.upstreamConnected).contains(.startTunnel))
    }

    @Test("A client that sends nothing within --client-timeout is relayed raw (the server may speak first)")
    func silentClientTunnelled() throws {
        let (session, _) = transparent(try SessionHarness.environment(), port: 25)
        let out = session.handle(.timerFired(.clientHello))
        #expect(out.connects.map { "\($0.0):\($0.1)" } == ["\(Self.destination):25"])
        #expect(!out.closesClient)
    }

    @Test("A request line is told from other bytes, waiting while too few have come")
    func requestLineSniffing() {
        #expect(ProxySession.startsHTTPRequest(bytes("GE")) == nil)
        #expect(ProxySession.startsHTTPRequest(bytes("GET ")) == true)
        #expect(ProxySession.startsHTTPRequest(bytes("BASELINE-CONTROL /")) == true)
        #expect(ProxySession.startsHTTPRequest(bytes(" GET")) == false)
        #expect(ProxySession.startsHTTPRequest(bytes("get /")) == false)
        #expect(ProxySession.startsHTTPRequest([0x00, 0x01]) == false)
        #expect(ProxySession.startsHTTPRequest(Array(repeating: 0x41, count: 21)) == false)
    }
}
