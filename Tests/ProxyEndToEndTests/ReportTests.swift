import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The app's policy judged against a real capture: good TLS (HTTP/1.1, and HTTP/2 from an h2-only nghttpd), a TLS
/// 1.0-only server, plain HTTP and a blocked handshake (a certificate for another name), captured with Apple's
/// defaults (no --plist) on iOS 17.
@Suite("atsproxy report on a capture")
struct ReportTests {
    /// An app policy with one needed entry, one unused, and one over-broad three ways.
    static let appPolicy = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <dict>
            <key>NSExceptionDomains</key>
            <dict>
                <key>media-server.example.com</key>
                <dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
                <key>good.test</key>
                <dict>
                    <key>NSIncludesSubdomains</key><true/>
                    <key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string>
                    <key>NSExceptionAllowsInsecureHTTPLoads</key><true/>
                </dict>
                <key>wild.test</key>
                <dict><key>NSIncludesSubdomains</key><true/></dict>
                <key>unused.example.com</key>
                <dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
            </dict>
        </dict>
        </plist>
        """

    @Test("Findings, exit codes, and a suggested plist that explain and report accept for every fixable URL")
    func mixedTraffic() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let capture = folder.appendingPathComponent("session.atscap").path
        let good = try await Origin(e2e, tls: "good", in: folder)
        let old = try await Origin(e2e, tls: "tls10", tls10: true, in: folder)
        let misnamed = try await Origin(e2e, tls: "wronghost", in: folder)
        let plain = try await Origin(e2e, in: folder)
        let h2 = try await NghttpdOrigin(
            e2e, certificate: "wild", htdocs: try await Htdocs(in: folder, files: ["h2.bin": 100]), in: folder)
        let proxy = try await Proxy(
            e2e,
            ["--ios", "17", "--capture", capture] + good.map("good.test") + old.map("tls10.test")
                + misnamed.map("wronghost.test") + plain.map("media-server.example.com") + h2.map("api.wild.test"),
            in: folder)
        func get(_ url: String) async throws -> CurlResult {
            try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, url], in: folder)
        }
        #expect(try await get("https://good.test/bytes/10").status == 200)
        #expect(try await get("https://good.test/bytes/30").status == 200)
        #expect(try await get("https://good.test/bytes/20").status == 200)
        #expect(try await get("https://tls10.test/").exit == 35)
        let h2Result = try await curl(
            ["-x", proxy.url, "--cacert", e2e.proxyCA, "--http2", "https://api.wild.test/h2.bin"], in: folder)
        #expect(h2Result.status == 200)
        let misnamedResult = try await get("https://wronghost.test/")
        #expect(misnamedResult.exit != 0 || misnamedResult.status != 200)
        _ = try await get("http://media-server.example.com/bytes/10")
        _ = try await proxy.process.waitForOutput { text in
            ["tls10.test", "wronghost.test", "media-server.example.com", "api.wild.test"].allSatisfy(text.contains)
                ? true : nil
        }
        kill(proxy.process.pid, SIGINT)
        #expect(try await proxy.process.waitForExit() == 0)

        let policy = folder.appendingPathComponent("app.plist")
        try Self.appPolicy.write(to: policy, atomically: true, encoding: .utf8)
        func atsproxy(_ arguments: [String]) async throws -> ProcessResult {
            try await runProcess(e2e.binary, arguments, in: folder, timeout: .seconds(60))
        }

        // The app's policy: two hosts fail (one fixable), four findings, exit 1.
        let text = try await atsproxy(["report", capture, "--plist", policy.path])
        #expect(text.status == 1, "\(text.stdout)\n\(text.stderr)")
        #expect(!text.stdout.contains("\u{1B}["), "colour when stdout is not a terminal")
        for expected in ["Missing exceptions (2):", "No exception can help: fix the server.", "simulated on iOS 17",
                         "Unused and over-broad exceptions (4):", "<key>NSAppTransportSecurity</key>"]
        {
            #expect(text.stdout.contains(expected), "no \(expected) in\n\(text.stdout)")
        }

        let jsonRun = try await atsproxy(["report", capture, "--plist", policy.path, "--format", "json"])
        #expect(jsonRun.status == 1)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(jsonRun.stdout.utf8)) as? [String: Any])
        let hosts = try #require(json["hosts"] as? [[String: Any]])
        let verdicts = Dictionary(uniqueKeysWithValues: hosts.map { ($0["host"] as? String ?? "", $0["verdict"] as? String ?? "") })
        #expect(verdicts == ["good.test": "allowed", "tls10.test": "fails", "wronghost.test": "fails",
                             "media-server.example.com": "allowed", "api.wild.test": "allowed"])
        // The h2 origin: its ALPN is in the host's TLS facts, and its parent entry's NSIncludesSubdomains was used.
        let h2Host = try #require(hosts.first { $0["host"] as? String == "api.wild.test" })
        let h2TLS = (h2Host["loads"] as? [[String: Any]])?.first?["tls"] as? [String: Any]
        #expect(h2TLS?["alpn"] as? String == "h2")
        #expect(h2Host["decidedBy"] as? String == "NSAppTransportSecurity › NSExceptionDomains › wild.test")
        let goodHost = try #require(hosts.first { $0["host"] as? String == "good.test" })
        #expect(goodHost["exchanges"] as? Int == 3)
        #expect(goodHost["decidedBy"] as? String == "NSAppTransportSecurity › NSExceptionDomains › good.test")
        let missing = try #require(json["missingExceptions"] as? [[String: Any]])
        let tls10 = try #require(missing.first { $0["host"] as? String == "tls10.test" })
        let fix = try #require(tls10["fix"] as? [String: Any])
        #expect(fix["domain"] as? String == "tls10.test")
        #expect((fix["keys"] as? [[String: Any]])?.first?["value"] as? String == "TLSv1.0")
        let wrong = try #require(missing.first { $0["host"] as? String == "wronghost.test" })
        #expect(wrong["fix"] == nil && (wrong["unfixable"] as? [String])?.isEmpty == false)
        let findings = try #require(json["findings"] as? [[String: Any]]).compactMap { $0["kind"] as? String }
        #expect(Set(findings) == ["unusedEntry", "subdomainsOnlyApex", "minimumTLSTooLow", "insecureHTTPOnlyHTTPS"])

        let markdown = try await atsproxy(["report", capture, "--plist", policy.path, "--format", "markdown"])
        #expect(markdown.stdout.contains("| `tls10.test` | ❌ fails"))

        // The suggestion: explain refuses none of the fixable URLs, and the report against it leaves only the
        // host no exception can help.
        let plistRun = try await atsproxy(["report", capture, "--format", "plist"])
        #expect(plistRun.status == 1)
        let suggested = folder.appendingPathComponent("suggested.plist")
        try plistRun.stdout.write(to: suggested, atomically: true, encoding: .utf8)
        #expect(plistRun.stdout.contains("<!-- tls10.test: "))
        let urls = ["https://good.test/bytes/10", "https://tls10.test/", "http://media-server.example.com/bytes/10"]
        let explain = try await atsproxy(["explain", "--ios", "17", "--plist", suggested.path] + urls)
        #expect(explain.status == 0, "\(explain.stdout)\n\(explain.stderr)")
        #expect(explain.stdout.contains("TLS: minimum TLSv1.0"))
        let again = try await atsproxy(["report", capture, "--plist", suggested.path, "--json"])
        let againJSON = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
        let stillMissing = try #require(againJSON["missingExceptions"] as? [[String: Any]])
        #expect(stillMissing.compactMap { $0["host"] as? String } == ["wronghost.test"])
        #expect((againJSON["findings"] as? [Any])?.isEmpty == true)
        #expect((againJSON["suggestion"] as? [String: Any])?["verified"] as? Bool == true)

        // Bad input: exit 2, naming the file.
        let notCapture = folder.appendingPathComponent("notes.txt")
        try "not a capture".write(to: notCapture, atomically: true, encoding: .utf8)
        let bad = try await atsproxy(["report", notCapture.path])
        #expect(bad.status == 2 && bad.stderr.contains("\(notCapture.path): not an ATSProxy capture"), "\(bad.stderr)")
        let brokenPlist = folder.appendingPathComponent("broken.plist")
        try "<plist><dict><key>x</key></plist>".write(to: brokenPlist, atomically: true, encoding: .utf8)
        let badPlist = try await atsproxy(["report", capture, "--plist", brokenPlist.path])
        #expect(badPlist.status == 2 && badPlist.stderr.contains(brokenPlist.path), "\(badPlist.stderr)")
    }

    @Test("A capture whose every load passes under the policy: exit 0")
    func fits() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let capture = folder.appendingPathComponent("ok.atscap").path
        let good = try await Origin(e2e, tls: "good", in: folder)
        let proxy = try await Proxy(e2e, ["--capture", capture] + good.map("good.test"), in: folder)
        #expect(try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://good.test/bytes/10"], in: folder).status == 200)
        _ = try await proxy.process.waitForOutput { $0.contains("good.test") ? true : nil }
        kill(proxy.process.pid, SIGINT)
        #expect(try await proxy.process.waitForExit() == 0)
        let r = try await runProcess(e2e.binary, ["report", capture], in: folder)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("The policy fits: every observed load passes."))
    }

    @Test("The proxy's own set-up site is not the app's traffic: left out of the report, marked in the capture")
    func proxySiteLeftOut() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let capture = folder.appendingPathComponent("site.atscap").path
        let good = try await Origin(e2e, tls: "good", in: folder)
        let proxy = try await Proxy(e2e, ["--capture", capture] + good.map("good.test"), in: folder)
        func viaProxy(_ arguments: [String]) async throws -> CurlResult {
            try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA] + arguments, in: folder)
        }
        #expect(try await viaProxy(["https://good.test/bytes/10"]).status == 200)
        // The site by its name, the proxy's own address through the proxy, and directly with any Host.
        #expect(try await viaProxy(["http://atsproxy.invalid/"]).status == 200)
        #expect(try await viaProxy(["\(proxy.url)/atsproxy-ca.pem"]).status == 200)
        #expect(try await curl(["-H", "Host: www.example.org", "\(proxy.url)/"], in: folder).status == 200)
        #expect(try await viaProxy(["https://atsproxy.invalid/trust-check"]).status == 200)
        _ = try await proxy.process.waitForOutput { text in
            ["http://www.example.org/", "https://atsproxy.invalid/trust-check"].allSatisfy(text.contains) ? true : nil
        }
        kill(proxy.process.pid, SIGINT)
        #expect(try await proxy.process.waitForExit() == 0)

        let r = try await runProcess(e2e.binary, ["report", capture, "--format", "json"], in: folder)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let hosts = (json["hosts"] as? [[String: Any]] ?? []).compactMap { $0["host"] as? String }
        #expect(hosts == ["good.test"], "\(r.stdout)")
        #expect((json["notes"] as? [String])?.contains(
            "4 exchanges with the proxy's own set-up site left out: not the app's traffic") == true, "\(r.stdout)")
        // Still listed, marked as the proxy's own.
        let shown = try await runProcess(e2e.binary, ["show", capture, "--json"], in: folder)
        let actions = try shown.stdout.split(separator: "\n").compactMap { line in
            (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["action"] as? String
        }
        #expect(actions.sorted() == ["proxySite", "proxySite", "proxySite", "proxySite", "relayed"], "\(shown.stdout)")
    }
}
