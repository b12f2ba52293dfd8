import CaptureStore
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `atsproxy har` and `show` on a capture of real traffic: curl and Python clients through the running proxy with
/// `--capture` (HTTP/1.1 and HTTP/2 clients, a form POST over plain HTTP, a TLS 1.0 server blocked at the handshake,
/// a tunnel, an upgraded connection), then the HAR read by a HAR 1.2 JSON schema, haralyzer and mitmproxy.
@Suite("HAR export and show on a real capture")
struct HARExportTests {
    @Test("run --har writes the run's exchanges as HAR at exit (from a temporary capture it then deletes); with --capture FILE, only this run's")
    func harOnRun() async throws {
        let e2e = try E2E.shared()
        let files = try e2e.folder()
        let old = try await Origin(e2e, tls: "tls10", tls10: true, in: files)
        let temporary = files.appendingPathComponent("tmp")
        try FileManager.default.createDirectory(at: temporary, withIntermediateDirectories: true)
        let har = files.appendingPathComponent("live.har").path
        let stage = try await Stage(old.map("tls10.test") + ["--har", har], environment: ["TMPDIR": temporary.path])
        #expect(stage.proxy.process.stdout.contains("HAR:     \(har) (written at exit"), "\(stage.proxy.process.stdout)")
        #expect(try await stage.curl(["https://\(Stage.httpsHost)/bytes/300"]).status == 200)
        #expect(try await stage.curl(["https://tls10.test/"]).exit == 35)
        #expect(!FileManager.default.fileExists(atPath: har), "written at exit, not before")
        kill(stage.proxy.process.pid, SIGINT)
        #expect(try await stage.proxy.process.waitForExit() == 0, "\(stage.proxy.process.stderr)")
        #expect(stage.proxy.process.stderr.contains("--har: 2 entries written to \(har)"), "\(stage.proxy.process.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.path).isEmpty, "the temporary capture is gone")
        let checker = e2e.packageRoot.appendingPathComponent("Tests/CaptureExportTests/Schema/check_har.py").path
        let check = try await runProcess(try TestPython.path(), [checker, har], in: files, timeout: .seconds(120))
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        func verdicts(_ path: String) throws -> [String] {
            let doc = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
            let entries = (doc?["log"] as? [String: Any])?["entries"] as? [[String: Any]] ?? []
            return entries.compactMap { ($0["_ats"] as? [String: Any])?["verdict"] as? String }.sorted()
        }
        #expect(try verdicts(har) == ["allowed", "blocked"])

        // Appended to a capture that already holds a run: the HAR has this run's exchanges only.
        let capture = files.appendingPathComponent("kept.atscap").path
        let second = files.appendingPathComponent("second.har").path
        for (i, output) in [har, second].enumerated() {
            let run = try await Stage(["--capture", capture, "--har", output])
            for _ in 0...i { #expect(try await run.curl(["https://\(Stage.httpsHost)/bytes/10"]).status == 200) }
            kill(run.proxy.process.pid, SIGINT)
            #expect(try await run.proxy.process.waitForExit() == 0, "\(run.proxy.process.stderr)")
        }
        #expect(try verdicts(second) == ["allowed", "allowed"], "the second run's two, not the first run's one")
        #expect(try CaptureReader(path: capture).count() == 3, "the capture keeps both runs")

        // A HAR that cannot be written is said before the proxy starts.
        let refused = try await runProcess(
            e2e.binary, ["run", "--listen", "127.0.0.1:0", "--ca-dir", e2e.caDir.path, "--har", "/nonexistent/x.har"],
            in: files)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("--har: the directory /nonexistent does not exist"), "\(refused.stderr)")
        // Nor over the capture it is read from.
        let before = try Data(contentsOf: URL(fileURLWithPath: capture))
        let same = try await runProcess(
            e2e.binary, ["run", "--listen", "127.0.0.1:0", "--ca-dir", e2e.caDir.path, "--capture", capture, "--har",
                         capture], in: files)
        #expect(same.status == 1)
        #expect(same.stderr.contains("--har and --capture name the same file"), "\(same.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: capture)) == before, "the capture is left as it was")
    }

    @Test("A session of mixed traffic exports to HAR that mitmproxy, haralyzer and the HAR 1.2 schema accept")
    func mixedSession() async throws {
        let e2e = try E2E.shared()
        let files = try e2e.folder()
        let capture = files.appendingPathComponent("session.atscap").path
        let old = try await Origin(e2e, tls: "tls10", tls10: true, in: files)
        // A CONNECT whose first bytes are not TLS is tunnelled raw, to this plain origin.
        let raw = try await Origin(e2e, in: files)
        // An HTTP/2-only origin (nghttpd), for an exchange that is HTTP/2 on both legs.
        let htdocs = try await Htdocs(in: files, files: ["big.bin": 5000])
        let h2Origin = try await NghttpdOrigin(e2e, certificate: "passthrough", htdocs: htdocs, in: files)
        let stage = try await Stage(
            old.map("tls10.test") + raw.map("tunnel.test") + h2Origin.map("passthrough.test")
                + ["--capture", capture, "--capture-bodies", "1k"])

        let h1 = try await stage.curl(["https://\(Stage.httpsHost)/bytes/300"])
        #expect(h1.status == 200)
        let h2 = try await stage.curl(["--http2", "https://passthrough.test/big.bin"])
        #expect(h2.status == 200)
        let form = try await stage.curl(["-d", "user=j%C3%B6rg&pass=a+b", "http://\(Stage.plainHost)/login?next=%2Fhome"])
        #expect(form.status == 200)
        let blocked = try await stage.curl(["https://tls10.test/"])
        #expect(blocked.exit == 35)
        let tunnel = try await stage.curl(["--proxytunnel", "http://tunnel.test/bytes/10"])
        #expect(tunnel.status == 200)
        let python = try await stage.python(["tunnel", Stage.httpsHost, "/bytes/100"])
        #expect(python["status"] as? Int == 200)
        let upgrade = try await stage.python(["upgrade", Stage.plainHost, "plain"], timeout: .seconds(40))
        #expect(upgrade["echoed"] as? Bool == true, "\(upgrade)")
        _ = try await stage.proxy.process.waitForOutput { $0.contains("upgraded connection ended") ? true : nil }
        // A capture reads while the proxy still writes it (WAL): what was committed so far is listed.
        let live = try await runProcess(e2e.binary, ["show", capture, "--filter", "verdict:blocked"], in: files)
        #expect(live.status == 0, "\(live.stderr)")
        #expect(live.stdout.contains("CONNECT https://tls10.test"), "\(live.stdout)")
        kill(stage.proxy.process.pid, SIGINT)
        #expect(try await stage.proxy.process.waitForExit() == 0)

        // har -o, then three independent readers.
        let har = files.appendingPathComponent("session.har").path
        let export = try await runProcess(e2e.binary, ["har", capture, "-o", har], in: files)
        #expect(export.status == 0, "\(export.stderr)")
        let pythonPath = try TestPython.path()
        let checker = e2e.packageRoot.appendingPathComponent("Tests/CaptureExportTests/Schema/check_har.py").path
        let check = try await runProcess(pythonPath, [checker, har], in: files, timeout: .seconds(120))
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")
        let mitmdump = URL(fileURLWithPath: pythonPath).deletingLastPathComponent().appendingPathComponent("mitmdump").path
        let dump = try await runProcess(mitmdump, ["-n", "-r", har], in: files, timeout: .seconds(120))
        #expect(dump.status == 0, "\(dump.stdout)\(dump.stderr)")
        #expect(dump.stdout.contains("GET https://\(Stage.httpsHost)/bytes/300"), "\(dump.stdout)")
        #expect(dump.stdout.contains("GET https://passthrough.test/big.bin HTTP/2"), "\(dump.stdout)")
        #expect(dump.stdout.contains("POST http://\(Stage.plainHost)/login?next=%2Fhome"), "\(dump.stdout)")

        let doc = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: har))) as? [String: Any])
        let entries = try #require((doc["log"] as? [String: Any])?["entries"] as? [[String: Any]])
        func kind(_ e: [String: Any]) -> String? { (e["_atsproxy"] as? [String: Any])?["kind"] as? String }
        func url(_ e: [String: Any]) -> String { (e["request"] as? [String: Any])?["url"] as? String ?? "" }
        func response(_ e: [String: Any]) -> [String: Any] { e["response"] as? [String: Any] ?? [:] }
        #expect(Set(entries.compactMap(kind)) == ["exchange", "blockedHandshake", "tunnel", "upgraded"], "\(entries.map(url))")

        let first = try #require(entries.first { url($0).hasSuffix("/bytes/300") })
        #expect(first["serverIPAddress"] as? String == "127.0.0.1", "the upstream's address, recorded at connect")
        #expect(((first["_atsproxy"] as? [String: Any])?["clientAddress"] as? String)?.hasPrefix("127.0.0.1:") == true)
        let tunnelled = try #require(entries.first { kind($0) == "tunnel" })
        #expect(tunnelled["serverIPAddress"] as? String == "127.0.0.1")
        #expect(((tunnelled["_atsproxy"] as? [String: Any])?["bytesToClient"] as? Int ?? 0) > 10)
        #expect((response(first)["content"] as? [String: Any])?["encoding"] as? String == "base64", "random bytes")
        #expect(((first["_tls"] as? [String: Any])?["upstream"] as? [String: Any])?["chain"] != nil)

        let big = try #require(entries.first { url($0).hasSuffix("/big.bin") })
        #expect((big["request"] as? [String: Any])?["httpVersion"] as? String == "HTTP/2")
        let cut = try #require(response(big)["content"] as? [String: Any])
        #expect(cut["size"] as? Int == 5000 && cut["_truncated"] as? Bool == true && cut["_keptSize"] as? Int == 1024)

        let post = try #require(entries.first { url($0).contains("/login") })
        #expect(post["serverIPAddress"] as? String == "127.0.0.1", "plain HTTP: the address of the host's connect")
        let postData = try #require((post["request"] as? [String: Any])?["postData"] as? [String: Any])
        #expect(postData["text"] as? String == "user=j%C3%B6rg&pass=a+b")
        #expect((postData["params"] as? [[String: String]])?.first == ["name": "user", "value": "jörg"])
        #expect((post["request"] as? [String: Any])?["queryString"] as? [[String: String]] == [["name": "next", "value": "/home"]])

        let refused = try #require(entries.first { kind($0) == "blockedHandshake" })
        let ats = try #require(refused["_ats"] as? [String: Any])
        #expect(ats["verdict"] as? String == "blocked")
        #expect((ats["sslError"] as? [String: Any])?["code"] as? Int == -9836)
        let violation = try #require((ats["violations"] as? [[String: Any]])?.first)
        // iOS 26 refuses TLS 1.0 whatever the plist says: the fix says so.
        #expect((violation["fix"] as? String)?.contains("the server must support TLS 1.2") == true, "\(violation)")

        // show: the listing's filter, and one exchange in full.
        let problems = try await runProcess(e2e.binary, ["show", capture, "--filter", "problems -verdict:violation"], in: files)
        #expect(problems.status == 0, "\(problems.stderr)")
        #expect(problems.stdout.split(separator: "\n").count == 1, "\(problems.stdout)")
        #expect(problems.stdout.contains("CONNECT https://tls10.test ---"), "\(problems.stdout)")
        let id = try #require(problems.stdout.split(separator: " ", omittingEmptySubsequences: true).first.map(String.init))
        let full = try await runProcess(e2e.binary, ["show", capture, id], in: files)
        #expect(full.status == 0, "\(full.stderr)")
        for part in ["Verdict: BLOCKED",    "Fix: no Info.plist exception can help", "Upstream handshake failed", "ATS Decision"] {
            #expect(full.stdout.contains(part), "no \(part) in:\n\(full.stdout)")
        }
    }
}
