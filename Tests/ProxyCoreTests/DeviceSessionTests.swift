import Foundation
import HTTP1Core
import Onboarding
import ProxyTrace
import TLSCore
import Testing

@testable import ProxyCore

/// What a device meets first: the set-up site, Apple's own hosts, and a client set to the wrong kind of proxy.
@Suite("Device set-up: onboarding site, Apple hosts, foreign greetings")
struct DeviceSessionTests {
    static func site() -> OnboardingSite {
        OnboardingSite(
            certificate: OnboardingCertificate(
                name: "Test CA", pem: "-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n",
                der: [0x30, 0x03, 0x02, 0x01, 0x01], mobileConfig: "<plist/>", sha256Fingerprint: "AA:BB"),
            settings: OnboardingSettings(policy: "App.ipa", iosProfile: "iOS 26", atsMode: "enforce (block tls)"))
    }

    // MARK: Foreign first bytes

    @Test("A SOCKS5 greeting gets SOCKS5's 'no acceptable methods' at once, a notice naming the fix, and a close")
    func socks5() throws {
        let out = SessionHarness.session(try SessionHarness.environment()).handle(.clientBytes([0x05, 0x01, 0x00]))
        #expect(out.toClient == [0x05, 0xFF])
        #expect(out.closesClient)
        #expect(out.connects.isEmpty)
        #expect(out.notices.contains { $0.contains("spoke SOCKS5") && $0.contains("set an HTTP proxy, not SOCKS") })
    }

    @Test("A SOCKS4 request gets SOCKS4's 'request rejected' (CD 91) at once, with the same notice")
    func socks4() throws {
        let request: [UInt8] = [0x04, 0x01, 0x00, 0x50, 127, 0, 0, 1] + Array("user".utf8) + [0]
        let out = SessionHarness.session(try SessionHarness.environment()).handle(.clientBytes(request))
        #expect(out.toClient == [0x00, 0x5B, 0, 0, 0, 0, 0, 0])
        #expect(out.closesClient)
        #expect(out.notices.contains { $0.contains("spoke SOCKS4") && $0.contains("set an HTTP proxy, not SOCKS") })
    }

    @Test("A TLS ClientHello sent straight to the proxy port: closed at once, told it is a proxy, not a TLS server")
    func tlsToProxyPort() throws {
        let client = try TLSEngine(context: try TLSContext(.client()), serverName: "good.test")
        _ = client.handshake()
        let out = SessionHarness.session(try SessionHarness.environment()).handle(.clientBytes(client.takeOutput()))
        #expect(out.toClient.isEmpty)
        #expect(out.closesClient)
        #expect(out.notices.contains { $0.contains("this is a proxy, not a TLS server: set it as the HTTP proxy") })
    }

    // MARK: Apple's own hosts

    @Test("An Apple host is tunnelled untouched, not watched, with a line saying why")
    func appleHostTunnelled() throws {
        let env = try SessionHarness.environment(mappings: [try HostMapping(parsing: "gsa.apple.com=127.0.0.1:9443")])
        let session = SessionHarness.session(env)
        let out = session.handle(.clientBytes(bytes("CONNECT gsa.apple.com:443 HTTP/1.1\r\nHost: gsa.apple.com:443\r\n\r\n")))
        #expect(out.clientText.isEmpty, "the 200 waits for the upstream, as for any tunnel")
        #expect(out.connects.first.map { $0 == ("127.0.0.1", 9443) } == true)
        #expect(out.notices.contains { $0.contains("gsa.apple.com:443: tunnelled without interception: Apple's own service") })
        let connected = session.handle(.upstreamConnected)
        #expect(connected.contains(.startTunnel))
        #expect(!session.watchesTunnel, "the device's own traffic is not judged against the app's policy")
        let closed = session.handle(.tunnelClosed(fromClient: 10, toClient: 20))
        let line = try #require(closed.exchanges.first)
        #expect(line.outcome == .notEvaluated)
        #expect(line.note?.contains("Apple's own service (Apple Account sign-in") == true)
        #expect(line.note?.contains("--intercept-apple-hosts") == true)
    }

    @Test("A name below a listed domain (.icloud.com) is covered; an Apple host not on the list is intercepted")
    func appleHostCoverage() throws {
        let hosts = AppleHosts.builtIn
        #expect(hosts.entry(for: "p123-caldav.icloud.com")?.service == "iCloud")
        #expect(hosts.entry(for: "icloud.com")?.service == "iCloud")
        #expect(hosts.entry(for: "developer.apple.com") == nil)
        #expect(hosts.entry(for: "notgsa.apple.com") == nil)
        let session = SessionHarness.session(try SessionHarness.environment())
        let out = session.handle(.clientBytes(bytes("CONNECT developer.apple.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")))
        #expect(out.clientText == "HTTP/1.1 200 Connection established\r\n\r\n", "sniffed for interception")
    }

    @Test("Each built-in pattern parses as --passthrough would parse it, and each entry names a source")
    func builtInPatternsValid() throws {
        for entry in AppleHosts.builtIn.entries {
            let written = entry.pattern.description
            #expect(try HostPattern(parsing: written, option: "test") == entry.pattern, "\(written)")
            #expect(!entry.source.isEmpty && !entry.service.isEmpty)
        }
        #expect(AppleHosts.builtIn.entry(for: "gsa.apple.com")?.source.contains("101555") == true)
    }

    @Test("An Apple host's cleartext outside apple.com's built-in exception is relayed without a verdict, not -1022")
    func appleHostCleartext() throws {
        // apple.com and its subdomains already allow cleartext by iOS's built-in exception; mzstatic.com does not.
        let request = bytes("GET http://s1.mzstatic.com/image.png HTTP/1.1\r\nHost: s1.mzstatic.com\r\n\r\n")
        let relayed = SessionHarness.session(try SessionHarness.environment()).handle(.clientBytes(request))
        #expect(relayed.connects.first.map { $0 == ("s1.mzstatic.com", 80) } == true)
        #expect(!relayed.clientText.contains("403"))
        // Without the list, the app's policy judges it: cleartext is refused before connecting.
        let judged = SessionHarness.session(try SessionHarness.environment(appleHosts: nil)).handle(.clientBytes(request))
        #expect(judged.clientText.hasPrefix("HTTP/1.1 403 "))
        #expect(judged.connects.isEmpty)
    }

    @Test("--intercept-apple-hosts (no list): an Apple host is intercepted like any other")
    func appleHostsOff() throws {
        let session = SessionHarness.session(try SessionHarness.environment(appleHosts: nil))
        let out = session.handle(.clientBytes(bytes("CONNECT gsa.apple.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")))
        #expect(out.clientText == "HTTP/1.1 200 Connection established\r\n\r\n")
        #expect(out.connects.isEmpty)
    }

    // MARK: The onboarding site

    @Test("GET http://atsproxy.invalid/ through the proxy: the site answers, nothing is connected, no ATS verdict")
    func onboardingPlain() throws {
        let env = try SessionHarness.environment(diagnosticsLevel: 1, jsonEvents: true, onboarding: Self.site())
        let out = SessionHarness.session(env).handle(.clientBytes(bytes(
            "GET http://atsproxy.invalid/ HTTP/1.1\r\nHost: atsproxy.invalid\r\n\r\n")))
        #expect(out.clientText.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(out.clientText.contains("Content-Type: text/html; charset=utf-8"))
        #expect(out.clientText.contains("Certificate Trust Settings"))
        #expect(out.connects.isEmpty)
        #expect(out.exchanges.map(\.outcome) == [.notEvaluated])
        #expect(!out.records.contains { $0.title == "ATS Decision" })
        #expect(!out.events.contains { $0.kind == .atsDecision })
    }

    @Test("Other proxies' onboarding names get a pointer to ours, not an ATS block page",
          arguments: ["mitm.it", "chls.pro", "burp"])
    func otherProxiesNames(host: String) throws {
        let env = try SessionHarness.environment(onboarding: Self.site())
        let out = SessionHarness.session(env).handle(.clientBytes(bytes(
            "GET http://\(host)/cert/pem HTTP/1.1\r\nHost: \(host)\r\n\r\n")))
        #expect(out.clientText.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(out.clientText.contains("href=\"http://atsproxy.invalid/\""))
        #expect(!out.clientText.contains("X-ATS"))
        #expect(out.connects.isEmpty)
        #expect(out.exchanges.map(\.outcome) == [.notEvaluated])
    }

    @Test("GET / opened directly on the proxy's port serves the page; other origin-form requests keep their 400")
    func onboardingDirect() throws {
        let env = try SessionHarness.environment(onboarding: Self.site())
        let page = SessionHarness.session(env).handle(.clientBytes(bytes("GET / HTTP/1.1\r\nHost: 192.168.1.20:8080\r\n\r\n")))
        #expect(page.clientText.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(page.clientText.contains("Connection: close"))
        #expect(page.closesClient)
        #expect(page.exchanges.first?.note == "ATSProxy's set-up page")
        let pem = SessionHarness.session(env).handle(.clientBytes(bytes("GET /atsproxy-ca.pem HTTP/1.1\r\nHost: p\r\n\r\n")))
        #expect(pem.clientText.hasSuffix("-----BEGIN CERTIFICATE-----\nTEST\n-----END CERTIFICATE-----\n"))
        let other = SessionHarness.session(env).handle(.clientBytes(bytes("GET /index.php HTTP/1.1\r\nHost: p\r\n\r\n")))
        #expect(other.clientText.hasPrefix("HTTP/1.1 400 "))
    }

    @Test("--auth: the site's pages opened directly need no credentials and leave out the policy; through the proxy, 407")
    func onboardingWithCredentials() throws {
        let env = try SessionHarness.environment(
            credentials: try ProxyCredentials(parsing: "qa:s3cret"), onboarding: Self.site())
        for path in ["/", "/atsproxy-ca.mobileconfig", "/atsproxy-ca.cer", "/atsproxy-ca.pem"] {
            let out = SessionHarness.session(env).handle(.clientBytes(bytes(
                "GET \(path) HTTP/1.1\r\nHost: 192.168.1.20:8080\r\n\r\n")))
            #expect(out.clientText.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(path): \(out.clientText.prefix(200))")
        }
        let page = SessionHarness.session(env).handle(.clientBytes(bytes("GET / HTTP/1.1\r\nHost: p\r\n\r\n")))
        #expect(page.clientText.contains("Certificate Trust Settings"))
        #expect(!page.clientText.contains("App.ipa"), "the policy's path is shown only with the credentials")
        // Other origin-form requests, and every request through the proxy, still need the credentials.
        for request in ["GET /index.php HTTP/1.1\r\nHost: p\r\n\r\n",
                        "POST / HTTP/1.1\r\nHost: p\r\nContent-Length: 0\r\n\r\n",
                        "GET http://atsproxy.invalid/ HTTP/1.1\r\nHost: atsproxy.invalid\r\n\r\n"] {
            let out = SessionHarness.session(env).handle(.clientBytes(bytes(request)))
            #expect(out.clientText.hasPrefix("HTTP/1.1 407 "), "\(request)")
        }
        let credentialed = SessionHarness.session(env).handle(.clientBytes(bytes(
            "GET http://atsproxy.invalid/ HTTP/1.1\r\nHost: atsproxy.invalid\r\n"
                + "Proxy-Authorization: Basic cWE6czNjcmV0\r\n\r\n")))
        #expect(credentialed.clientText.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(credentialed.clientText.contains("App.ipa"))
    }

    @Test("The proxy's own address through the proxy is the site, not a loop")
    func ownAddressThroughProxy() throws {
        let site = Self.site()
        site.addOwnAddress(host: "192.168.1.20", port: 8080, shown: true)
        let env = try SessionHarness.environment(onboarding: site)
        let out = SessionHarness.session(env).handle(.clientBytes(bytes(
            "GET http://192.168.1.20:8080/ HTTP/1.1\r\nHost: 192.168.1.20:8080\r\n\r\n")))
        #expect(out.clientText.hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(out.clientText.contains("192.168.1.20:8080"), "the page names the proxy's address")
        #expect(out.connects.isEmpty)
    }

    @Test("Plaintext inside a CONNECT to the site's name is answered with where the site is, never tunnelled")
    func onboardingPlainTunnel() throws {
        let session = SessionHarness.session(try SessionHarness.environment(onboarding: Self.site()))
        _ = session.handle(.clientBytes(bytes("CONNECT atsproxy.invalid:80 HTTP/1.1\r\nHost: x\r\n\r\n")))
        let out = session.handle(.clientBytes(bytes("GET / HTTP/1.1\r\nHost: atsproxy.invalid\r\n\r\n")))
        #expect(out.connects.isEmpty, "the name is never looked up or connected to")
        #expect(out.clientText.hasPrefix("HTTP/1.1 400 "))
        #expect(out.clientText.contains("http://atsproxy.invalid/"))
        #expect(out.closesClient)
    }

    @Test("CONNECT atsproxy.invalid:443: TLS with a leaf from the proxy's CA, no upstream, /trust-check answered")
    func onboardingTLS() throws {
        let env = try SessionHarness.environment(onboarding: Self.site())
        let session = SessionHarness.session(env)
        let connect = session.handle(.clientBytes(bytes("CONNECT atsproxy.invalid:443 HTTP/1.1\r\nHost: x\r\n\r\n")))
        #expect(connect.clientText == "HTTP/1.1 200 Connection established\r\n\r\n")
        let client = try TLSEngine(context: try TLSContext(.client()), serverName: "atsproxy.invalid")
        var toServer: [UInt8] = []
        _ = client.handshake()
        toServer = client.takeOutput()
        var done = false
        for _ in 0..<10 where !done {
            let out = session.handle(.clientBytes(toServer))
            #expect(out.connects.isEmpty, "the site never connects upstream")
            client.feed(out.toClient)
            if case .complete = client.handshake() { done = true }
            toServer = client.takeOutput()
        }
        #expect(done)
        let leaf = try #require(client.peerCertificateChain.first)
        #expect(leaf.issuer.contains("ProxyCoreTests CA"))
        #expect(leaf.subject.contains("atsproxy.invalid"))
        try client.write(bytes("GET /trust-check HTTP/1.1\r\nHost: atsproxy.invalid\r\n\r\n"))
        let answer = session.handle(.clientBytes(toServer + client.takeOutput()))
        client.feed(answer.toClient)
        var plaintext = [UInt8](repeating: 0, count: 65536)
        let (n, _) = plaintext.withUnsafeMutableBytes { client.read(into: $0) }
        let text = String(decoding: plaintext.prefix(n), as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(text)")
        #expect(text.contains("✓ Trusted"))
        #expect(answer.exchanges.map { "\($0.method) \($0.url) \($0.status ?? 0)" } == [
            "GET https://atsproxy.invalid/trust-check 200"
        ])
        #expect(answer.exchanges.first?.outcome == .notEvaluated)
    }
}
