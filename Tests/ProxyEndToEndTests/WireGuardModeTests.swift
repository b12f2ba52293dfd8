import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `--mode wireguard` against the real thing: Debian's `wireguard-go` and `wg` (wireguard-tools) as the device, in a
/// network namespace the test makes (198.18.0.0/15 underneath, the proxy's 198.19.0.0/16 tunnel addresses inside),
/// brought up with the configuration the proxy wrote. Needs root, as the other namespace tests.
@Suite("WireGuard mode with wireguard-go")
struct WireGuardModeTests {
    @Test("""
        A wireguard-go device that routes everything into the tunnel and has no proxy settings: ping, the good host \
        passes (curl, Python, openssl s_client), TLS 1.0 is blocked with the app's codes, cleartext gets -1022, DNS \
        is answered, QUIC is refused and counted, the set-up page loads by name, the exchanges are in the web view
        """)
    func wireguardGoDevice() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let net = try NetworkNamespace()
        defer { net.remove() }
        // The namespace's resolver is the proxy's tunnel address (`ip netns exec` mounts this file over
        // /etc/resolv.conf), as the configuration's DNS line makes it on a phone.
        let netnsFolder = URL(fileURLWithPath: "/etc/netns/\(net.name)")
        try FileManager.default.createDirectory(at: netnsFolder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: netnsFolder) }

        // Origins on the host's end of the pair: reached by the proxy directly, by the device only through the
        // tunnel (it routes everything there), so each connection keeps its real destination address.
        let origin = net.hostAddress
        func originProcess(port: Int, tls: [String], name: String) async throws -> TestProcess {
            let process = try TestProcess(
                "/usr/bin/python3", [e2e.origin] + tls,
                environment: ["ORIGIN_ADDRESS": origin, "ORIGIN_PORT": String(port)], in: folder, name: name)
            _ = try await process.waitForLine(startingWith: "PORT \(port)")
            return process
        }
        let goodOrigin = try await originProcess(
            port: 443, tls: ["--tls", e2e.cert("good").cert, e2e.cert("good").key], name: "origin-good")
        defer { goodOrigin.stop() }
        let oldOrigin = try await originProcess(
            port: 8443, tls: ["--tls", e2e.cert("tls10").cert, e2e.cert("tls10").key, "--tls10"],
            name: "origin-tls10")
        defer { oldOrigin.stop() }
        let plainOrigin = try await originProcess(port: 80, tls: [], name: "origin-plain")
        defer { plainOrigin.stop() }

        let caDir = folder.appendingPathComponent("wg-ca")
        let proxyCA = caDir.appendingPathComponent("atsproxy-ca.pem").path
        let proxy = try TestProcess(
            e2e.binary,
            ["run", "--mode", "wireguard:\(net.hostAddress):0", "--ca-dir", caDir.path, "--trust-ca", e2e.testCA,
             "--threads", "2", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0"],
            in: folder, name: "atsproxy-wireguard")
        defer { proxy.stop() }
        let udpLine = try await proxy.waitForLine(startingWith: "WireGuard: UDP \(net.hostAddress):")
        let port = try #require(udpLine.split(separator: " ")[2].split(separator: ":").last.map(String.init))
        let webLine = try await proxy.waitForLine(startingWith: "Web:")
        let webURL = try #require(webLine.split(separator: " ").first { $0.hasPrefix("http://") }.map(String.init))

        // The configuration the proxy wrote, as the WireGuard app would import it.
        let wireguardDir = caDir.appendingPathComponent("wireguard")
        let config = try String(contentsOf: wireguardDir.appendingPathComponent("device.conf"), encoding: .utf8)
        func value(_ key: String) throws -> String {
            try #require(config.split(separator: "\n").first { $0.hasPrefix("\(key) = ") }?
                .dropFirst(key.count + 3).description)
        }
        #expect(try value("Endpoint") == "\(net.hostAddress):\(port)")
        #expect(try value("AllowedIPs") == "0.0.0.0/0, ::/0")
        let deviceAddress = try value("Address"), tunnelAddress = try value("DNS")
        let device = String(deviceAddress.split(separator: "/")[0])
        try "nameserver \(tunnelAddress)\n".write(
            to: netnsFolder.appendingPathComponent("resolv.conf"), atomically: true, encoding: .utf8)
        for name in ["proxy.key", "device.key", "device.conf"] {
            let attributes = try FileManager.default.attributesOfItem(
                atPath: wireguardDir.appendingPathComponent(name).path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "\(name)")
        }
        // wg takes the keys and the peer; the address, DNS and routes are wg-quick's, set here by hand.
        let wgConfig = folder.appendingPathComponent("wg-device.conf")
        try config.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { !$0.hasPrefix("Address") && !$0.hasPrefix("DNS") }.joined(separator: "\n")
            .write(to: wgConfig, atomically: true, encoding: .utf8)

        // The interface name is also wireguard-go's control socket in /var/run/wireguard, shared by namespaces.
        let interface = "atspwg\(UInt32.random(in: 0..<1_000_000))"
        let (ip, prefix) = net.exec(["/usr/bin/wireguard-go", "-f", interface])
        let wireguardGo = try TestProcess(ip, prefix, in: folder, name: "wireguard-go")
        defer {
            // Stopped by SIGKILL, it cannot remove its control socket.
            wireguardGo.stop()
            unlink("/var/run/wireguard/\(interface).sock")
        }
        func inside(_ arguments: [String], timeout: Duration = .seconds(20)) async throws -> ProcessResult {
            let (ip, prefix) = net.exec(arguments)
            return try await runProcess(ip, prefix, in: folder, timeout: timeout)
        }
        // Poll until wireguard-go has made the interface and its control socket.
        let deadline = ContinuousClock.now + .seconds(20)
        while try await inside(["/usr/bin/wg", "show", interface]).status != 0 {
            try #require(ContinuousClock.now < deadline, "wireguard-go did not come up: \(wireguardGo.stderr)")
            try #require(wireguardGo.isRunning, "wireguard-go exited: \(wireguardGo.stderr)")
            try await Task.sleep(for: .milliseconds(100))
        }
        // Everything into the tunnel, as wg-quick does for AllowedIPs 0.0.0.0/0: the tunnel's own UDP carries a
        // firewall mark and keeps the namespace's link; every other packet takes the tunnel's table.
        for step in [
            ["/usr/bin/wg", "setconf", interface, wgConfig.path],
            ["/usr/bin/wg", "set", interface, "fwmark", "51820"],
            ["/usr/sbin/ip", "addr", "add", deviceAddress, "dev", interface],
            ["/usr/sbin/ip", "link", "set", interface, "up"],
            ["/usr/sbin/ip", "route", "add", "default", "dev", interface, "table", "51820"],
            ["/usr/sbin/ip", "rule", "add", "not", "fwmark", "51820", "table", "51820"],
        ] {
            let r = try await inside(step)
            try #require(r.status == 0, "\(step.joined(separator: " ")): \(r.stderr)")
        }

        let ping = try await inside(["/usr/bin/ping", "-c", "3", "-W", "2", tunnelAddress])
        #expect(ping.stdout.contains("3 received"), "\(ping.stdout) \(ping.stderr)")
        let devicePublic = try await runProcess(
            "/bin/sh", ["-c", "grep '^PrivateKey' \(wgConfig.path) | sed 's/PrivateKey = //' | /usr/bin/wg pubkey"],
            in: folder, timeout: .seconds(10))
        let publicKey = devicePublic.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try await proxy.waitForLine(
            startingWith: "atsproxy: WireGuard: handshake with device \(publicKey) from \(net.clientAddress):",
            stderr: true)

        /// curl on the device, with no proxy settings: only the tunnel brings it to the proxy.
        func deviceCurl(_ arguments: [String]) async throws -> CurlResult {
            let tag = UUID().uuidString.prefix(8)
            let headers = folder.appendingPathComponent("dev-\(tag).headers")
            let body = folder.appendingPathComponent("dev-\(tag).body")
            let r = try await inside(
                ["/usr/bin/curl", "-sS", "--noproxy", "*", "--max-time", "15", "-D", headers.path, "-o", body.path]
                    + arguments)
            let headerText = FileManager.default.fileExists(atPath: headers.path)
                ? try String(contentsOf: headers, encoding: .utf8) : ""
            return CurlResult(exit: r.status, headerText: headerText, body: body, stderr: r.stderr)
        }

        // The ATS-good host: intercepted by SNI, relayed to the address the device connected to.
        let passed = try await deviceCurl(
            ["--cacert", proxyCA, "--resolve", "good.test:443:\(origin)", "https://good.test/"])
        #expect(passed.status == 200, "\(passed.stderr)")
        let python = try await inside(
            ["/usr/bin/python3", E2EScript.path("device_https.py"), "good.test", origin, proxyCA])
        #expect(python.stdout.hasPrefix("HTTP/1.") && python.stdout.contains(" 200"), "\(python.stdout)")
        let sClient = try await inside(
            ["/usr/bin/openssl", "s_client", "-connect", "\(origin):443", "-servername", "good.test", "-CAfile",
             proxyCA, "-verify_return_error", "-brief"])
        #expect(sClient.status == 0, "\(sClient.stderr)")
        #expect(sClient.stderr.contains("Verification: OK"), "\(sClient.stderr)")

        // The TLS 1.0-only host: blocked as the app's handshake would fail, with its codes on the console.
        let blocked = try await deviceCurl(
            ["--cacert", proxyCA, "--resolve", "tls10.test:8443:\(origin)", "https://tls10.test:8443/"])
        #expect(blocked.exit != 0)
        let blockLine = try await proxy.waitForLine(startingWith: "CONNECT https://tls10.test")
        #expect(blockLine.contains("BLOCKED") && blockLine.contains("-1200/-9836"), "\(blockLine)")

        // Cleartext, judged by its Host under Apple's defaults: -1022 without connecting.
        let cleartext = try await deviceCurl(["--resolve", "plain.test:80:\(origin)", "http://plain.test/x"])
        #expect(cleartext.status == 403)
        #expect(cleartext.header("X-ATS-Error")?.hasPrefix("-1022") == true, "\(cleartext.headerText)")
        _ = try await proxy.waitForLine(startingWith: "GET http://plain.test/x 403")

        // DNS to the tunnel address: the host's resolver answers A; AAAA and HTTPS are empty (IPv4 only in the
        // tunnel; HTTPS records would advertise HTTP/3); the proxy's own name is its tunnel address.
        func dns(_ name: String, _ type: String) async throws -> String {
            try await inside(["/usr/bin/python3", E2EScript.path("device_dns.py"), tunnelAddress, name, type]).stdout
        }
        #expect(try await dns("localhost", "A") == "0 127.0.0.1 0\n")
        #expect(try await dns("localhost", "AAAA") == "0 - 0\n")
        #expect(try await dns("good.test", "HTTPS") == "0 - 0\n")
        #expect(try await dns("atsproxy.invalid", "A") == "0 \(tunnelAddress) 0\n")
        #expect(try await dns("no-such-name.invalid", "A") == "3 - 0\n")
        // An app with a resolver of its own is answered too, from the address it asked.
        let ownResolver = try await inside(
            ["/usr/bin/python3", E2EScript.path("device_dns.py"), "198.18.255.53", "localhost", "A"]).stdout
        #expect(ownResolver == "0 127.0.0.1 0\n")
        // The device's own resolver (glibc, through the resolv.conf above) finds the set-up page by its name.
        let setUp = try await deviceCurl(["http://atsproxy.invalid/"])
        #expect(setUp.status == 200, "\(setUp.stderr)")

        // QUIC: each attempt answered with Version Negotiation at once, counted, and the fallback said once.
        let quic = try await inside(["/usr/bin/python3", E2EScript.path("device_quic.py"), origin, "3"])
        #expect(quic.stdout == "0 True\n0 True\n0 True\n", "\(quic.stdout) \(quic.stderr)")
        let fallback = try await deviceCurl(
            ["--cacert", proxyCA, "--resolve", "good.test:443:\(origin)", "https://good.test/again"])
        #expect(fallback.status == 200)
        _ = try await proxy.waitForLine(
            startingWith: "atsproxy: \(device): 3 QUIC attempts refused; the app fell back to TCP", stderr: true)
        let info = try await runProcess(
            "/usr/bin/curl", ["-sS", "--max-time", "10", "\(webURL)api/info"], in: folder, timeout: .seconds(15))
        #expect(info.stdout.contains("\"quicAttemptsRefused\":3"), "\(info.stdout)")
        // The web view's header says it, in a real headless browser (the page fills it from /api/info).
        let header = try await runProcess(
            try TestPython.path(),
            [TestPython.packageRoot.appendingPathComponent("Tests/webview/header_fact.py").path, webURL, "fact-quic",
             "3 attempts refused; apps fall back to TCP"],
            in: folder, timeout: .seconds(90))
        #expect(header.status == 0, "\(header.stdout) \(header.stderr)")

        // The web view lists the device's exchanges, judged, with the device's tunnel address as the client.
        func webJSON(_ path: String) async throws -> [String: Any] {
            let r = try await runProcess(
                "/usr/bin/curl", ["-sS", "--max-time", "10", "\(webURL)\(path)"], in: folder, timeout: .seconds(15))
            return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        }
        // The capture takes each record a moment after its response: polled, bounded.
        var rows: [[String: Any]] = []
        let listed = ContinuousClock.now + .seconds(10)
        while !rows.contains(where: { $0["url"] as? String == "https://good.test/again" }), ContinuousClock.now < listed {
            try await Task.sleep(for: .milliseconds(100))
            rows = try #require(try await webJSON("api/exchanges")["exchanges"] as? [[String: Any]])
        }
        let row = try #require(rows.first { $0["url"] as? String == "https://good.test/again" }, "\(rows)")
        #expect(row["verdict"] as? String == "ok", "\(row)")
        let id = try #require(row["id"] as? Int)
        let detail = try await webJSON("api/exchanges/\(id)")
        let client = (detail["connection"] as? [String: Any])?["clientAddress"] as? String
        #expect(client?.hasPrefix("\(device):") == true, "\(detail)")

        // At shutdown, what went through the tunnel.
        kill(proxy.pid, SIGINT)
        let summary = try await proxy.waitForOutput(stderr: true) { text in
            text.split(separator: "\n").first { $0.contains("TCP connections through the tunnel") }.map(String.init)
        }
        let connections = summary.split(separator: " ").dropFirst(2).first.flatMap { Int($0) } ?? 0
        #expect(connections >= 7, "\(summary)")  // curl ×5, Python, s_client
        _ = try await proxy.waitForExit(timeout: .seconds(20))

        // The proxy's private key is never printed (the device's is, in its configuration's QR code, by design).
        let proxyPrivate = try String(contentsOf: wireguardDir.appendingPathComponent("proxy.key"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!proxy.stdout.contains(proxyPrivate) && !proxy.stderr.contains(proxyPrivate))
    }

    @Test("The banner's QR code reads back as the device's configuration; a second start keeps the keys")
    func configurationQRCodeAndKeptKeys() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let caDir = folder.appendingPathComponent("wg-ca")
        func start() async throws -> (banner: String, config: String) {
            let proxy = try TestProcess(
                e2e.binary, ["run", "--mode", "wireguard:127.0.0.1:0", "--ca-dir", caDir.path, "--threads", "1",
                    "--listen", "127.0.0.1:0"],
                in: folder, name: "atsproxy-wireguard")
            defer { proxy.stop() }
            // On loopback the banner ends with its Set-up line (no QR code of the set-up page).
            let banner = try await proxy.waitForOutput { text in
                text.contains("\nSet-up:") && text.hasSuffix("\n") ? text : nil
            }
            let config = try String(
                contentsOf: caDir.appendingPathComponent("wireguard/device.conf"), encoding: .utf8)
            return (banner, config)
        }
        let first = try await start()
        let lines = first.banner.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let heading = try #require(lines.firstIndex { $0.contains("device configuration: ") })
        #expect(lines[heading].contains("(new keys: import it again)"))
        let code = Array(lines[(heading + 1)...].prefix { !$0.isEmpty && !$0.hasPrefix("Set-up:") })
        #expect(code.count > 10, "\(first.banner)")
        let image = folder.appendingPathComponent("wireguard-qr.pgm")
        try DeviceTests.pgm(halfBlocks: code).write(to: image)
        let decoded = try await runProcess("/usr/bin/zbarimg", ["--raw", "-q", "-Sbinary", image.path], in: folder)
        #expect(decoded.stdout == first.config, "\(decoded.stdout) \(decoded.stderr)")

        let second = try await start()
        func key(_ config: String, _ name: String) -> String? {
            config.split(separator: "\n").first { $0.hasPrefix(name) }.map(String.init)
        }
        #expect(key(second.config, "PrivateKey") == key(first.config, "PrivateKey"))
        #expect(key(second.config, "PublicKey") == key(first.config, "PublicKey"))
        #expect(!second.banner.contains("(new keys"))
    }

    @Test("""
        --wireguard-devices 3: three device keys (0600); the set-up page through the proxy has the WireGuard section, \
        and each written configuration is its download, byte for byte
        """)
    func severalDevicesOnTheSetUpPage() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let caDir = folder.appendingPathComponent("wg-ca")
        let proxy = try TestProcess(
            e2e.binary,
            ["run", "--mode", "wireguard:127.0.0.1:0", "--wireguard-devices", "3", "--ca-dir", caDir.path,
             "--threads", "1", "--listen", "127.0.0.1:0"],
            in: folder, name: "atsproxy-wireguard-devices")
        defer { proxy.stop() }
        let line = try await proxy.waitForLine(startingWith: "ATSProxy listening on 127.0.0.1:")
        let port = try #require(line.split(separator: ":").last?.split(separator: " ").first.flatMap { Int($0) })
        _ = try await proxy.waitForOutput { $0.contains("\nSet-up:") ? $0 : nil }
        let proxyURL = "http://127.0.0.1:\(port)"

        let wireguardDir = caDir.appendingPathComponent("wireguard")
        for name in ["proxy.key", "device.key", "device-2.key", "device-3.key"] {
            let attributes = try FileManager.default.attributesOfItem(
                atPath: wireguardDir.appendingPathComponent(name).path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "\(name)")
        }

        let page = try await curl(["-x", proxyURL, "http://atsproxy.invalid/"], in: folder)
        #expect(page.status == 200)
        let html = page.bodyText
        #expect(html.contains("Or: WireGuard"), "\(html)")
        #expect(html.contains("<svg "))
        // Every configuration the proxy wrote is offered and downloads as written; the first always is.
        let written = ["device.conf", "device-2.conf", "device-3.conf"].filter {
            FileManager.default.fileExists(atPath: wireguardDir.appendingPathComponent($0).path)
        }
        #expect(written.first == "device.conf")
        for name in written {
            let config = try String(contentsOf: wireguardDir.appendingPathComponent(name), encoding: .utf8)
            #expect(html.contains("href=\"/wireguard/\(name)\""), "\(name)")
            let download = try await curl(["-x", proxyURL, "http://atsproxy.invalid/wireguard/\(name)"], in: folder)
            #expect(download.status == 200, "\(name)")
            #expect(download.bodyText == config, "\(name)")
            #expect(download.header("Content-Type") == "text/plain; charset=utf-8")
            #expect(download.header("Content-Disposition")?.hasPrefix("attachment; filename=\"atsproxy") == true)
        }
        // Opened directly on the proxy's address (loopback, no credentials needed): the same download.
        let direct = try await curl(["\(proxyURL)/wireguard/device.conf"], in: folder)
        let firstConfig = try String(
            contentsOf: wireguardDir.appendingPathComponent("device.conf"), encoding: .utf8)
        #expect(direct.status == 200)
        #expect(direct.bodyText == firstConfig)
    }
}
