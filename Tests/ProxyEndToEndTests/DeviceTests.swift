import Foundation
import TestSupport
import Testing

/// A device's first steps through the proxy, with curl and Python standing in for it: the set-up site and the CA in
/// each format, the trust check, Apple's own hosts, the wrong kind of proxy, the diagnostics levels, the start-up
/// QR code, and a phone-sized screenshot of the page.
@Suite("Device set-up through the proxy")
struct DeviceTests {
    /// `atsproxy ca export --format FORMAT` of the shared CA, as bytes.
    private func export(_ e2e: E2E, _ format: String, in folder: URL) async throws -> Data {
        let out = folder.appendingPathComponent("export.\(format)")
        let r = try await runProcess(
            e2e.binary, ["ca", "export", "--ca-dir", e2e.caDir.path, "--format", format, "--out", out.path], in: folder)
        #expect(r.status == 0, "\(r.stderr)")
        return try Data(contentsOf: out)
    }

    @Test("http://atsproxy.invalid/ through the proxy, and http://PROXY:PORT/ directly and through it: the page")
    func onboardingPage() async throws {
        let stage = try await Stage()
        let page = try await stage.curl(["http://atsproxy.invalid/"])
        #expect(page.status == 200)
        #expect(page.header("Content-Type") == "text/html; charset=utf-8")
        let html = page.bodyText
        for part in [
            "Certificate Trust Settings", "xcrun simctl keychain booted add-root-cert", "media-server.plist",
            "iOS 26", "enforce (block tls)", "https://atsproxy.invalid/trust-check", "atsproxy-ca.mobileconfig",
        ] {
            #expect(html.contains(part), "the page has no \(part)")
        }
        let direct = try await curl(["\(stage.proxy.url)/"], in: stage.folder)
        #expect(direct.status == 200)
        #expect(direct.bodyText.contains("Certificate Trust Settings"))
        let own = try await stage.curl(["\(stage.proxy.url)/"])
        #expect(own.status == 200, "the proxy's own address through the proxy is the page, not a loop")
        #expect(own.bodyText.contains("Certificate Trust Settings"))
    }

    @Test("The CA as .pem, .cer and .mobileconfig: the bytes `ca export` writes; the profile parses with the root payload")
    func caFormats() async throws {
        let stage = try await Stage()
        let folder = stage.folder
        let pem = try await stage.curl(["http://atsproxy.invalid/atsproxy-ca.pem"])
        #expect(pem.status == 200)
        #expect(try Data(contentsOf: pem.body) == (try await export(stage.e2e, "pem", in: folder)))
        #expect(try Data(contentsOf: pem.body) == (try Data(contentsOf: URL(fileURLWithPath: stage.e2e.proxyCA))))
        let cer = try await stage.curl(["http://atsproxy.invalid/atsproxy-ca.cer"])
        #expect(cer.header("Content-Type") == "application/x-x509-ca-cert")
        let der = try await export(stage.e2e, "der", in: folder)
        #expect(try Data(contentsOf: cer.body) == der)
        let profile = try await stage.curl(["http://atsproxy.invalid/atsproxy-ca.mobileconfig"])
        #expect(profile.header("Content-Type") == "application/x-apple-aspen-config")
        #expect(try Data(contentsOf: profile.body) == (try await export(stage.e2e, "mobileconfig", in: folder)))
        // Parsed as a plist by Python's plistlib: one com.apple.security.root payload holding the CA's DER.
        let derFile = folder.appendingPathComponent("ca.der")
        try der.write(to: derFile)
        let parsed = try await runProcess(
            "/usr/bin/python3", [E2EScript.path("profile_check.py"), profile.body.path, derFile.path], in: folder)
        #expect(parsed.stdout == "ok\n", "\(parsed.stdout) \(parsed.stderr)")
        // The private key is never served, under any name.
        let key = try String(contentsOf: stage.e2e.caDir.appendingPathComponent("atsproxy-ca-key.pem"), encoding: .utf8)
        let keyLine = try #require(key.split(separator: "\n").dropFirst().first.map(String.init))
        for path in ["atsproxy-ca-key.pem", "ca.key", "key", ""] {
            let r = try await stage.curl(["http://atsproxy.invalid/\(path)"])
            #expect(!r.bodyText.contains("PRIVATE KEY") && !r.bodyText.contains(keyLine), "/\(path)")
        }
        for r in [pem, cer, profile] {
            let body = try Data(contentsOf: r.body)
            #expect(body.range(of: Data(keyLine.utf8)) == nil)
        }
    }

    @Test("The trust check loads with the proxy's CA trusted and fails without (curl and Python); never an ATS line")
    func trustCheck() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let log = folder.appendingPathComponent("events.jsonl")
        let stage = try await Stage(["--log-json", log.path])
        let trusted = try await stage.curl(["https://atsproxy.invalid/trust-check"])
        #expect(trusted.status == 200)
        #expect(trusted.bodyText.contains("✓ Trusted"))
        // Trusting only the test CA (not the proxy's): the handshake fails, as on a device without the CA.
        let untrusted = try await curl(
            ["-x", stage.proxy.url, "--cacert", e2e.testCA, "https://atsproxy.invalid/trust-check"], in: folder)
        #expect(untrusted.exit == 60, "\(untrusted.stderr)")
        let r = try await runProcess(
            "/usr/bin/python3",
            [E2EScript.path("trust_check_client.py"), String(stage.proxy.port), e2e.proxyCA, e2e.testCA], in: folder)
        #expect(r.stdout == "200 trusted / refused\n", "\(r.stdout) \(r.stderr)")
        let notice = try await stage.proxy.process.waitForOutput(stderr: true) { text in
            text.contains("atsproxy.invalid:443: the client's TLS handshake failed") ? text : nil
        }
        #expect(notice.contains("the client does not trust ATSProxy's CA"))
        // The site's exchanges are lines of their own, never ATS verdicts.
        _ = try await stage.curl(["http://atsproxy.invalid/"])
        let events = try await jsonEvents(log) { events in
            events.filter { ($0["url"] as? String)?.contains("atsproxy.invalid") == true && $0["kind"] as? String == "exchange" }
                .count >= 3
        }
        let site = events.filter { ($0["url"] as? String)?.contains("atsproxy.invalid") == true }
        #expect(!site.contains { $0["kind"] as? String == "atsDecision" })
        for event in site where event["kind"] as? String == "exchange" {
            let exchange = event["exchange"] as? [String: Any]
            #expect(exchange?["outcome"] as? String == "notEvaluated", "\(event)")
            #expect((exchange?["errors"] as? [Any])?.isEmpty == true, "\(event)")
        }
    }

    @Test("mitm.it, chls.pro/ssl and http://burp get a pointer to ATSProxy's page, not an ATS block page")
    func otherProxiesNames() async throws {
        let stage = try await Stage()
        for url in ["http://mitm.it/", "http://chls.pro/ssl", "http://burp/"] {
            let r = try await stage.curl([url])
            #expect(r.status == 200, "\(url)")
            #expect(r.bodyText.contains("http://atsproxy.invalid/"), "\(url)")
            #expect(r.header("X-ATS-Error") == nil, "\(url)")
            #expect(!r.bodyText.contains("-1022"), "\(url)")
        }
    }

    @Test("An Apple host is tunnelled untouched with a line saying why; --intercept-apple-hosts intercepts it")
    func appleHostTunnelled() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "good", in: folder)
        let plain = try await Origin(e2e, in: folder)
        let proxy = try await Proxy(e2e, origin.map("gsa.apple.com") + plain.map("s1.mzstatic.com"), in: folder)
        // The device's own cleartext (App Store content, outside apple.com's built-in exception) is relayed, not
        // blocked -1022 as the app's would be.
        let content = try await curl(["-x", proxy.url, "http://s1.mzstatic.com/bytes/10"], in: folder)
        #expect(content.status == 200, "\(content.headerText)")
        // -k: the origin's certificate names good.test; what matters is whose certificate the client got.
        let tunnelled = try await curl(["-v", "-k", "-x", proxy.url, "https://gsa.apple.com/bytes/10"], in: folder)
        #expect(tunnelled.status == 200)
        #expect(Self.issuer(tunnelled.stderr)?.hasSuffix("CN=ATSProxy E2E Test CA") == true, "the origin's own leaf")
        let line = try await proxy.process.waitForOutput { text in
            text.split(separator: "\n").first { $0.hasPrefix("CONNECT https://gsa.apple.com") }.map(String.init)
        }
        #expect(line.contains("Apple's own service (Apple Account sign-in"), "\(line)")
        #expect(!line.contains("violat"), "\(line)")

        let intercepting = try await Proxy(e2e, origin.map("gsa.apple.com") + ["--intercept-apple-hosts"], in: folder)
        let intercepted = try await curl(["-v", "-k", "-x", intercepting.url, "https://gsa.apple.com/bytes/10"], in: folder)
        let subject = try await runProcess("/usr/bin/openssl", ["x509", "-in", e2e.proxyCA, "-noout", "-subject"], in: folder)
        let proxyCN = try #require(subject.stdout.components(separatedBy: "CN = ").last?.trimmingCharacters(in: .newlines))
        #expect(Self.issuer(intercepted.stderr)?.hasSuffix("CN=\(proxyCN)") == true, "the proxy's leaf")

        let list = try await runProcess(e2e.binary, ["passthrough", "--list"], in: folder)
        #expect(list.status == 0)
        #expect(list.stdout.contains("gsa.apple.com"))
        #expect(list.stdout.contains("support.apple.com/101555"))
        #expect(list.stdout.contains("httptoolkit/httptoolkit#814"))
        withExtendedLifetime((origin, plain)) {}
    }

    /// The server certificate's issuer as `curl -v` prints it.
    static func issuer(_ curlStderr: String) -> String? {
        curlStderr.split(separator: "\n").first { $0.hasPrefix("*  issuer: ") }.map { String($0.dropFirst(11)) }
    }

    /// "At once" without a clock: the proxy's client timeout is set far above the clients' own (60 s against 20),
    /// so a client that got an answer got it from the greeting's refusal, not from the request-head deadline.
    @Test("SOCKS4 and SOCKS5 greetings are refused at once in their own protocol; TLS to the proxy port is closed at once")
    func wrongKindOfProxy() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let proxy = try await Proxy(e2e, ["--client-timeout", "60"], in: folder)
        let r = try await runProcess(
            "/usr/bin/python3", [E2EScript.path("foreign_greetings.py"), String(proxy.port)], in: folder)
        #expect(r.stdout == "05ff 005b000000000000 closed\n", "\(r.stdout) \(r.stderr)")
        // curl set to a SOCKS5 proxy fails with SOCKS's own error (no acceptable method), not with a timeout.
        let socksCurl = try await curl(["--max-time", "20", "--socks5-hostname", proxy.address, "http://good.test/"], in: folder)
        #expect(socksCurl.exit == 97, "curl exit \(socksCurl.exit): \(socksCurl.stderr)")
        let notices = try await proxy.process.waitForOutput(stderr: true) { text in
            text.contains("spoke SOCKS4") && text.contains("not a TLS server") ? text : nil
        }
        #expect(notices.contains("set an HTTP proxy, not SOCKS"))
    }

    @Test("--diagnostics 1, 2 and 3 differ: 2 adds headers and TLS details, 3 adds the bytes", arguments: [1, 2, 3])
    func diagnosticsLevels(level: Int) async throws {
        let stage = try await Stage(["--diagnostics", String(level)])
        let r = try await stage.curl(["-H", "X-Probe: device-level-test", "https://\(Stage.httpsHost)/bytes/10"])
        #expect(r.status == 200)
        let stderr = try await stage.proxy.process.waitForOutput(stderr: true) { text in
            text.contains("Did Finish") ? text : nil
        }
        #expect(stderr.contains("CFNetwork Diagnostics [\(level):"))
        #expect(stderr.contains("Protocol Enqueue") && stderr.contains("Response: HTTP/1.1 200"))
        #expect(stderr.contains("TLS Handshake") && stderr.contains("Protocol: TLSv1.3"))
        // The request's header, a response header of the origin's, and TLS details.
        let details = ["X-Probe: device-level-test", "X-Body-SHA256: ", "Cipher Suite: ", "Certificate 0: "]
        for detail in details {
            #expect(stderr.contains(detail) == (level >= 2), "level \(level): \(detail)")
        }
        #expect(stderr.contains("SSL-READ") == (level == 3), "level \(level): the bytes")
    }

    @Test("On a LAN address the banner has the set-up URL and a QR code of it that a decoder reads")
    func startupQRCode() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        // The machine's first non-loopback IPv4 address: the proxy only listens there, nothing connects to it.
        let addresses = try await runProcess("/usr/bin/hostname", ["-I"], in: folder).stdout
        let lan = try #require(
            addresses.split(separator: " ").map(String.init).first { $0.contains(".") && !$0.hasPrefix("127.") },
            "this test needs a non-loopback IPv4 address (hostname -I: \(addresses))")
        let process = try TestProcess(
            e2e.binary,
            ["run", "--listen", "\(lan):0", "--allow-lan", "--auth", "qa:device-test", "--ca-dir", e2e.caDir.path],
            in: folder, name: "atsproxy-lan")
        defer { process.stop() }
        let banner = try await process.waitForOutput { text in text.contains("Set-up:") && text.hasSuffix("\n\n") ? text : nil }
        let lines = banner.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let setUp = try #require(lines.firstIndex { $0.hasPrefix("Set-up:") })
        let url = try #require(lines[setUp].split(separator: " ").first { $0.hasPrefix("http://\(lan):") }.map(String.init))
        #expect(lines[setUp].contains("http://atsproxy.invalid/"))
        let code = Array(lines[(setUp + 1)...].prefix { !$0.isEmpty })
        #expect(code.count > 10, "\(banner)")
        let image = folder.appendingPathComponent("banner-qr.pgm")
        try Self.pgm(halfBlocks: code).write(to: image)
        let decoded = try await runProcess("/usr/bin/zbarimg", ["--raw", "-q", "-Sbinary", image.path], in: folder)
        #expect(decoded.stdout == url, "\(decoded.stdout) \(decoded.stderr)")
    }

    @Test("--auth on a LAN address: a client in a network namespace gets the set-up pages directly without credentials (no policy path); through the proxy they need them")
    func setUpSiteWithCredentialsOnTheLAN() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let namespace = try NetworkNamespace()
        defer { namespace.remove() }
        let plist = e2e.packageRoot.appendingPathComponent("config/media-server.plist").path
        let process = try TestProcess(
            e2e.binary,
            ["run", "--listen", "\(namespace.hostAddress):0", "--allow-lan", "--auth", "qa:lan-s3cret",
             "--ca-dir", e2e.caDir.path, "--plist", plist],
            in: folder, name: "atsproxy-netns")
        defer { process.stop() }
        let banner = try await process.waitForOutput { text in text.contains("Set-up:") && text.hasSuffix("\n\n") ? text : nil }
        let setUp = try #require(banner.split(separator: "\n").first { $0.hasPrefix("Set-up:") })
        let page = try #require(
            setUp.split(separator: " ").first { $0.hasPrefix("http://\(namespace.hostAddress):") }.map(String.init))
        let proxyURL = String(page.dropLast())  // http://198.18.x.y:PORT
        func curlInside(_ arguments: [String]) async throws -> CurlResult {
            let (ip, prefix) = namespace.exec(["/usr/bin/curl"])
            let tag = UUID().uuidString.prefix(8)
            let headers = folder.appendingPathComponent("ns-\(tag).headers"), body = folder.appendingPathComponent("ns-\(tag).body")
            let r = try await runProcess(
                ip, prefix + ["-sS", "--max-time", "20", "-D", headers.path, "-o", body.path] + arguments, in: folder,
                timeout: .seconds(30))
            return CurlResult(
                exit: r.status, headerText: try String(contentsOf: headers, encoding: .utf8), body: body, stderr: r.stderr)
        }

        // The phone following the QR code: no credentials, straight to the proxy's address.
        let direct = try await curlInside([page])
        #expect(direct.status == 200, "\(direct.headerText) \(direct.stderr)")
        #expect(direct.bodyText.contains("Certificate Trust Settings"))
        #expect(!direct.bodyText.contains("media-server.plist"), "the policy's path is shown only with credentials")
        let profile = try await curlInside(["\(proxyURL)/atsproxy-ca.mobileconfig"])
        #expect(profile.status == 200)
        #expect(profile.header("Content-Type") == "application/x-apple-aspen-config")
        #expect(try Data(contentsOf: profile.body) == (try await export(e2e, "mobileconfig", in: folder)))
        for (suffix, format) in [("pem", "pem"), ("cer", "der")] {
            let file = try await curlInside(["\(proxyURL)/atsproxy-ca.\(suffix)"])
            #expect(file.status == 200, "\(suffix)")
            #expect(try Data(contentsOf: file.body) == (try await export(e2e, format, in: folder)), "\(suffix)")
        }
        // Anything else on the proxy's address, and the site through the proxy, still need them.
        #expect(try await curlInside(["\(proxyURL)/index.php"]).status == 407)
        #expect(try await curlInside(["-x", proxyURL, "http://atsproxy.invalid/"]).status == 407)
        let through = try await curlInside(["-x", proxyURL, "--proxy-user", "qa:lan-s3cret", "http://atsproxy.invalid/"])
        #expect(through.status == 200)
        #expect(through.bodyText.contains("media-server.plist"))
    }

    /// Half-block text (▀ ▄ █, two module rows per character) as a PGM image, 4 pixels per module, with a white
    /// border around it.
    static func pgm(halfBlocks lines: [String]) -> Data {
        let rows = lines.flatMap { line -> [[Bool]] in
            let chars = Array(line)
            return [chars.map { $0 == "█" || $0 == "▀" }, chars.map { $0 == "█" || $0 == "▄" }]
        }
        let width = (rows.map(\.count).max() ?? 0) + 8
        let height = rows.count + 8
        let scale = 4
        var pixels = [UInt8](repeating: 255, count: width * scale * height * scale)
        for (r, row) in rows.enumerated() {
            for (c, dark) in row.enumerated() where dark {
                for y in 0..<scale {
                    for x in 0..<scale { pixels[((r + 4) * scale + y) * width * scale + (c + 4) * scale + x] = 0 }
                }
            }
        }
        return Data("P5\n\(width * scale) \(height * scale)\n255\n".utf8) + Data(pixels)
    }

    @Test("A phone-sized screenshot (390×844) of the page in headless Chromium: no sideways scrolling; kept as an artefact")
    func phoneScreenshot() async throws {
        let stage = try await Stage()
        let artefacts = stage.e2e.packageRoot.appendingPathComponent(".build/test-artefacts")
        try FileManager.default.createDirectory(at: artefacts, withIntermediateDirectories: true)
        let png = artefacts.appendingPathComponent("onboarding-390x844.png")
        let python = try TestPython.path()
        let r = try await runProcess(
            python,
            [E2EScript.path("onboarding_screenshot.py"), String(stage.proxy.port), png.path,
             artefacts.appendingPathComponent("onboarding-390-full.png").path],
            in: stage.folder, timeout: .seconds(90))
        #expect(r.stdout == "ATSProxy: set up this device | 390 fits\n", "\(r.stdout) \(r.stderr.suffix(2000))")
        let header = try Data(contentsOf: png).prefix(8)
        #expect(header == Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), "a PNG at \(png.path)")
    }
}
