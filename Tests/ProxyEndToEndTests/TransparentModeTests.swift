import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `--mode transparent` as a lab runs it: a device with no proxy settings at all behind a Linux gateway whose
/// nftables ruleset (the one `--print-nft` prints) redirects it to the proxy, and origins beyond the gateway, all in
/// network namespaces the test makes and removes.
@Suite("Transparent mode through a gateway")
struct TransparentModeTests {
    @Test("""
        A device with no proxy settings: the good host passes, TLS 1.0 is blocked with the app's codes, cleartext \
        gets -1022, QUIC is refused and counted, a connection straight to the port is refused
        """)
    func deviceBehindGateway() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let net = try GatewayNamespaces()
        defer { net.remove() }
        let (good, old, plain) = (net.originAddresses[0], net.originAddresses[1], net.originAddresses[2])

        // The gateway's ruleset, exactly as printed.
        let printed = try await runProcess(
            e2e.binary,
            ["run", "--mode", "transparent:0.0.0.0:8443", "--print-nft", "--devices-interface", net.gatewayDeviceEnd],
            in: folder, timeout: .seconds(20))
        try #require(printed.status == 0, "\(printed.stderr)")
        let loaded = try runCommand(
            "/bin/ip", ["netns", "exec", net.gateway, "/usr/sbin/nft", "-f", "-"], input: Data(printed.stdout.utf8),
            limit: 20)
        try #require(loaded.status == 0, "nft -f: \(loaded.stderrText)")

        func originProcess(_ address: String, port: Int, tls: [String], name: String) async throws -> TestProcess {
            let (ip, prefix) = net.exec(in: net.origin, ["/usr/bin/python3", e2e.origin] + tls)
            let process = try TestProcess(
                ip, prefix, environment: ["ORIGIN_ADDRESS": address, "ORIGIN_PORT": String(port)], in: folder,
                name: name)
            _ = try await process.waitForLine(startingWith: "PORT \(port)")
            return process
        }
        let goodOrigin = try await originProcess(
            good, port: 443, tls: ["--tls", e2e.cert("good").cert, e2e.cert("good").key], name: "origin-good")
        defer { goodOrigin.stop() }
        let oldOrigin = try await originProcess(
            old, port: 443, tls: ["--tls", e2e.cert("tls10").cert, e2e.cert("tls10").key, "--tls10"],
            name: "origin-tls10")
        defer { oldOrigin.stop() }
        let plainOrigin = try await originProcess(plain, port: 80, tls: [], name: "origin-plain")
        defer { plainOrigin.stop() }

        let (ip, prefix) = net.exec(
            in: net.gateway,
            [e2e.binary, "run", "--mode", "transparent:0.0.0.0:8443", "--ca-dir", e2e.caDir.path, "--trust-ca",
             e2e.testCA, "--web", "127.0.0.1:8099", "--threads", "2"])
        let proxy = try TestProcess(ip, prefix, in: folder, name: "atsproxy-transparent")
        defer { proxy.stop() }
        _ = try await proxy.waitForLine(startingWith: "Transparent: 0.0.0.0:8443")

        /// curl on the device, with no proxy settings: only the gateway's redirect brings it to the proxy.
        func deviceCurl(_ arguments: [String]) async throws -> CurlResult {
            let (ip, prefix) = net.exec(in: net.device, ["/usr/bin/curl"])
            let tag = UUID().uuidString.prefix(8)
            let headers = folder.appendingPathComponent("dev-\(tag).headers")
            let body = folder.appendingPathComponent("dev-\(tag).body")
            let r = try await runProcess(
                ip, prefix + ["-sS", "--noproxy", "*", "--max-time", "15", "-D", headers.path, "-o", body.path]
                    + arguments,
                in: folder, timeout: .seconds(20))
            let headerText = FileManager.default.fileExists(atPath: headers.path)
                ? try String(contentsOf: headers, encoding: .utf8) : ""
            return CurlResult(exit: r.status, headerText: headerText, body: body, stderr: r.stderr)
        }
        func onDevice(_ arguments: [String]) async throws -> ProcessResult {
            let (ip, prefix) = net.exec(in: net.device, arguments)
            return try await runProcess(ip, prefix, in: folder, timeout: .seconds(20))
        }

        // The ATS-good host: intercepted by SNI, relayed to its original address.
        let passed = try await deviceCurl(
            ["--cacert", e2e.proxyCA, "--resolve", "good.test:443:\(good)", "https://good.test/"])
        #expect(passed.status == 200, "\(passed.stderr)")
        let python = try await onDevice(
            ["/usr/bin/python3", E2EScript.path("device_https.py"), "good.test", good, e2e.proxyCA])
        #expect(python.stdout.hasPrefix("HTTP/1.") && python.stdout.contains(" 200"), "\(python.stdout)")
        let sClient = try await onDevice(
            ["/usr/bin/openssl", "s_client", "-connect", "\(good):443", "-servername", "good.test", "-CAfile",
             e2e.proxyCA, "-verify_return_error", "-brief"])
        #expect(sClient.status == 0, "\(sClient.stderr)")
        #expect(sClient.stderr.contains("Verification: OK"), "\(sClient.stderr)")

        // The TLS 1.0-only host: blocked as the app's handshake would fail, with its codes on the console.
        let blocked = try await deviceCurl(
            ["--cacert", e2e.proxyCA, "--resolve", "tls10.test:443:\(old)", "https://tls10.test/"])
        #expect(blocked.exit != 0)
        let oldClient = try await onDevice(
            ["/usr/bin/openssl", "s_client", "-connect", "\(old):443", "-servername", "tls10.test", "-CAfile",
             e2e.proxyCA, "-brief"])
        #expect(oldClient.status != 0)
        let blockLine = try await proxy.waitForLine(startingWith: "CONNECT https://tls10.test")
        #expect(blockLine.contains("BLOCKED") && blockLine.contains("-1200/-9836"), "\(blockLine)")

        // Cleartext, judged by its Host under Apple's defaults: -1022 without connecting.
        let cleartext = try await deviceCurl(["--resolve", "plain.test:80:\(plain)", "http://plain.test/x"])
        #expect(cleartext.status == 403)
        #expect(cleartext.header("X-ATS-Error")?.hasPrefix("-1022") == true, "\(cleartext.headerText)")
        _ = try await proxy.waitForLine(startingWith: "GET http://plain.test/x 403")

        // QUIC: each attempt answered with Version Negotiation at once, counted, and the fallback said once.
        let quic = try await onDevice(["/usr/bin/python3", E2EScript.path("device_quic.py"), good, "3"])
        #expect(quic.stdout == "0 True\n0 True\n0 True\n", "\(quic.stdout) \(quic.stderr)")
        let fallback = try await deviceCurl(
            ["--cacert", e2e.proxyCA, "--resolve", "good.test:443:\(good)", "https://good.test/"])
        #expect(fallback.status == 200)
        _ = try await proxy.waitForLine(
            startingWith: "atsproxy: \(net.deviceAddress): 3 QUIC attempts refused; the app fell back to TCP",
            stderr: true)
        let (gatewayIP, gatewayPrefix) = net.exec(
            in: net.gateway, ["/usr/bin/curl", "-sS", "--max-time", "10", "http://127.0.0.1:8099/api/info"])
        let info = try await runProcess(gatewayIP, gatewayPrefix, in: folder, timeout: .seconds(15))
        #expect(info.stdout.contains("\"quicAttemptsRefused\":3"), "\(info.stdout)")

        // A connection straight to the proxy's port was redirected by nothing: refused, with a notice.
        let direct = try await deviceCurl(["http://\(net.gatewayAddress):8443/"])
        #expect(direct.status == nil && direct.exit != 0)
        _ = try await proxy.waitForOutput(stderr: true) { text in
            text.contains("\(net.deviceAddress) connected straight to the proxy's port") ? true : nil
        }
    }
}
