import Foundation
import Testing

@Suite("Auto-passthrough of hosts an app pins in code", .serialized)
struct AutoPassthroughEndToEndTests {
    struct Scene {
        let e2e: E2E
        let folder: URL
        let good: Origin
        let pinned: Origin
        let proxy: Proxy
        let script = pinningClientScript
        let bundle: URL
        let pin: String

        init(_ extra: [String] = []) async throws {
            e2e = try E2E.shared()
            folder = try e2e.folder()
            good = try await Origin(e2e, tls: "good", in: folder)
            pinned = try await Origin(e2e, tls: "passthrough", in: folder)
            proxy = try await Proxy(e2e, good.map("good.test") + pinned.map("passthrough.test") + extra, in: folder)
            bundle = folder.appendingPathComponent("bundle.pem")
            let cas = try String(contentsOfFile: e2e.proxyCA, encoding: .utf8)
                + String(contentsOfFile: e2e.testCA, encoding: .utf8)
            try cas.write(to: bundle, atomically: true, encoding: .utf8)
            // The pin: the SHA-256 of the origin's own leaf (DER), which only a tunnel delivers.
            let der = try await runProcess(
                "/usr/bin/openssl", ["x509", "-in", e2e.cert("passthrough").cert, "-outform", "DER", "-out", "leaf.der"],
                in: folder)
            #expect(der.status == 0, "\(der.stderr)")
            let sum = try await sha256(of: folder.appendingPathComponent("leaf.der"), in: folder)
            pin = sum
        }

        /// Runs the pinning client over `hosts`, one connection each, in order.
        func run(_ hosts: [String]) async throws -> [String] {
            let r = try await runProcess(
                "/usr/bin/python3", [script, String(proxy.port), bundle.path, "passthrough.test", pin] + hosts,
                in: folder, timeout: .seconds(60))
            guard r.status == 0, let list = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: String]]
            else { throw HarnessError("pinning client failed: \(r.stdout) \(r.stderr)") }
            return list.map { $0["result"] ?? "" }
        }
    }

    @Test("Refused three times while another host is trusted, the pinned host is tunnelled and then works")
    func pinnedInCodeIsTunnelled() async throws {
        let scene = try await Scene(["--log-json", "events.jsonl"])
        let first = try await scene.run(["good.test", "passthrough.test", "passthrough.test", "passthrough.test"])
        #expect(first == ["HTTP/1.1 200 OK", "refused", "refused", "refused"], "\(first)")
        let notice = try await scene.proxy.process.waitForLine(startingWith: "atsproxy: the app at 127.0.0.1", stderr: true)
        #expect(notice.contains("refused the proxy's certificate for passthrough.test 3 times while trusting it for 1 "
            + "other host: it likely pins this host in code; tunnelling it from now on"), "\(notice)")
        // From now on the client reaches the origin itself: its pin holds, and the request goes through.
        let second = try await scene.run(["passthrough.test", "good.test"])
        #expect(second == ["HTTP/1.1 200 OK", "HTTP/1.1 200 OK"], "\(second)")
        let line = try await scene.proxy.process.waitForLine(startingWith: "CONNECT https://passthrough.test --- TUNNEL ")
        #expect(line.contains("tunnel, not intercepted: the client at 127.0.0.1 refused the proxy's certificate for "
            + "it repeatedly"), "\(line)")
        // The hellos are still judged (the test origin speaks TLS 1.3, which ATS allows).
        #expect(line.contains("server chose TLSv1.3"), "\(line)")
        // good.test stays intercepted: its line is an ordinary exchange.
        _ = try await scene.proxy.process.waitForLine(startingWith: "GET https://good.test/bytes/10 200")
        let notices = scene.proxy.process.stderr.components(separatedBy: "it likely pins this host in code").count - 1
        #expect(notices == 1, "\(scene.proxy.process.stderr)")
        // Machines get the decision too.
        let decided = try await jsonEvents(scene.folder.appendingPathComponent("events.jsonl"), kind: "autoPassthrough", count: 1)
        #expect(decided.first?["url"] as? String == "https://passthrough.test", "\(decided)")
    }

    @Test("--no-auto-passthrough keeps intercepting the refused host")
    func turnedOff() async throws {
        let scene = try await Scene(["--no-auto-passthrough"])
        let results = try await scene.run(
            ["good.test", "passthrough.test", "passthrough.test", "passthrough.test", "passthrough.test"])
        #expect(results == ["HTTP/1.1 200 OK", "refused", "refused", "refused", "refused"], "\(results)")
        #expect(!scene.proxy.process.stderr.contains("likely pins"), "\(scene.proxy.process.stderr)")
    }

    @Test("A client that trusts no host is told the CA is not trusted, and nothing is tunnelled")
    func untrustedCA() async throws {
        let scene = try await Scene()
        for _ in 0..<3 {
            // curl with only the test CA: it refuses the proxy's leaf with an unknown_ca alert.
            let r = try await curl(
                ["-x", scene.proxy.url, "--cacert", scene.e2e.testCA, "https://good.test/bytes/10"], in: scene.folder)
            #expect(r.exit != 0)
        }
        let notice = try await scene.proxy.process.waitForOutput(stderr: true) { text in
            text.split(separator: "\n").first { $0.contains("and trusted it for none") }.map(String.init)
        }
        #expect(notice.contains("refused the proxy's certificate 3 times for 1 host and trusted it for none: it does "
            + "not trust ATSProxy's CA"), "\(notice)")
        #expect(notice.contains("this is not pinning"), "\(notice)")
        let r = try await curl(
            ["-x", scene.proxy.url, "--cacert", scene.e2e.proxyCA, "https://good.test/bytes/10"], in: scene.folder)
        #expect(r.status == 200, "\(r.stderr)")
        #expect(!scene.proxy.process.stderr.contains("likely pins"))
    }
}
