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
        A wireguard-go device with the proxy's configuration completes the handshake and pings the proxy's tunnel \
        address; the log names the device; TCP into the tunnel is said to be not built yet; the keys are 0600
        """)
    func wireguardGoDevice() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let net = try NetworkNamespace()
        defer { net.remove() }
        let caDir = folder.appendingPathComponent("wg-ca")
        let proxy = try TestProcess(
            e2e.binary,
            ["run", "--mode", "wireguard:\(net.hostAddress):0", "--ca-dir", caDir.path, "--threads", "1",
             "--listen", "127.0.0.1:0"],
            in: folder, name: "atsproxy-wireguard")
        defer { proxy.stop() }
        let udpLine = try await proxy.waitForLine(startingWith: "WireGuard: UDP \(net.hostAddress):")
        let port = try #require(udpLine.split(separator: " ")[2].split(separator: ":").last.map(String.init))

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
        for name in ["proxy.key", "device.key", "device.conf"] {
            let attributes = try FileManager.default.attributesOfItem(
                atPath: wireguardDir.appendingPathComponent(name).path)
            #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600, "\(name)")
        }
        // wg takes the keys and the peer; the address and DNS are wg-quick's, set here by hand.
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
        func inside(_ arguments: [String], timeout: Duration = .seconds(15)) async throws -> ProcessResult {
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
        for step in [
            ["/usr/bin/wg", "setconf", interface, wgConfig.path],
            ["/usr/sbin/ip", "addr", "add", deviceAddress, "dev", interface],
            ["/usr/sbin/ip", "link", "set", interface, "up"],
            // Only the proxy's tunnel address goes into the tunnel: the namespace's own link stays the underlay.
            ["/usr/sbin/ip", "route", "add", "\(tunnelAddress)/32", "dev", interface],
        ] {
            let r = try await inside(step)
            try #require(r.status == 0, "\(step.joined(separator: " ")): \(r.stderr)")
        }

        let ping = try await inside(["/usr/bin/ping", "-c", "3", "-W", "2", tunnelAddress], timeout: .seconds(20))
        #expect(ping.status == 0, "\(ping.stdout) \(ping.stderr)")
        #expect(ping.stdout.contains("3 received"), "\(ping.stdout)")

        let handshakes = try await inside(["/usr/bin/wg", "show", interface, "latest-handshakes"])
        let latest = handshakes.stdout.split(whereSeparator: \.isWhitespace).last.flatMap { Int($0) }
        #expect((latest ?? 0) > 0, "\(handshakes.stdout)")

        let devicePublic = try await runProcess(
            "/bin/sh", ["-c", "grep '^PrivateKey' \(wgConfig.path) | sed 's/PrivateKey = //' | /usr/bin/wg pubkey"],
            in: folder, timeout: .seconds(10))
        let publicKey = devicePublic.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try #require(publicKey.count == 44)
        _ = try await proxy.waitForLine(
            startingWith: "atsproxy: WireGuard: handshake with device \(publicKey) from \(net.clientAddress):",
            stderr: true)

        // TCP into the tunnel: dropped, said once, honestly.
        let curl = try await inside(["/usr/bin/curl", "-sS", "--max-time", "2", "http://\(tunnelAddress)/"])
        #expect(curl.status != 0)
        _ = try await proxy.waitForLine(
            startingWith: "atsproxy: WireGuard: TCP to \(tunnelAddress):80 from device \(publicKey) dropped: TCP and "
                + "UDP through WireGuard are not built yet",
            stderr: true)

        // At shutdown, the count of what the tunnel dropped.
        kill(proxy.pid, SIGINT)
        let summary = try await proxy.waitForOutput(stderr: true) { text in
            text.split(separator: "\n").first { $0.contains("packets from the device were dropped") }.map(String.init)
        }
        // "atsproxy: WireGuard: N TCP and M UDP packets …"
        let droppedTCP = summary.split(separator: " ").dropFirst(2).first.flatMap { Int($0) } ?? 0
        #expect(droppedTCP >= 1, "\(summary)")
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
