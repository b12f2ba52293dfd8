import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One `--fault` KIND (or `--block-list` kind) on a host of its own, and what a strict client sees.
private struct FaultCase: Sendable {
    var option: String
    var host: String
    var kind: String
    /// curl's exit status with only the proxy's CA trusted (and `curlArguments`).
    var curlExit: Int32
    /// What curl's error says.
    var curlSays: String
    var curlArguments: [String] = []
    /// `openssl s_client`'s "Verify return code" for the certificate kinds (nil: not asked).
    var verifyCode: String?
    /// The app's error, as the console line names it.
    var appError: String
}

private let cases: [FaultCase] = [
    FaultCase(option: "--fault", host: "expired.test", kind: "expired", curlExit: 60,
              curlSays: "certificate has expired", verifyCode: "10 (certificate has expired)", appError: "-1202/-9814"),
    FaultCase(option: "--fault", host: "future.test", kind: "not-yet-valid", curlExit: 60,
              curlSays: "certificate is not yet valid", verifyCode: "9 (certificate is not yet valid)",
              appError: "-1202/-9815"),
    FaultCase(option: "--fault", host: "wronghost.test", kind: "wrong-host", curlExit: 60,
              curlSays: "no alternative certificate subject name matches target host name 'wronghost.test'",
              verifyCode: "62 (hostname mismatch)", appError: "-1202/-9843"),
    FaultCase(option: "--fault", host: "selfsigned.test", kind: "self-signed", curlExit: 60,
              curlSays: "self-signed certificate", verifyCode: "18 (self-signed certificate)", appError: "-1202/-9813"),
    FaultCase(option: "--fault", host: "untrusted.test", kind: "untrusted-root", curlExit: 60,
              curlSays: "self-signed certificate in certificate chain",
              verifyCode: "19 (self-signed certificate in certificate chain)", appError: "-1202/-9813"),
    FaultCase(option: "--fault", host: "sha1.test", kind: "sha1", curlExit: 60,
              curlSays: "CA signature digest algorithm too weak",
              verifyCode: "68 (CA signature digest algorithm too weak)", appError: "-1202/-9802"),
    FaultCase(option: "--fault", host: "rsa1024.test", kind: "rsa1024", curlExit: 60,
              curlSays: "EE certificate key too weak", verifyCode: "66 (EE certificate key too weak)",
              appError: "-1202/-9802"),
    // A client that offers TLS 1.2 and up, as iOS does under ATS: the server's protocol_version alert.
    FaultCase(option: "--fault", host: "tls10.test", kind: "tls1.0", curlExit: 35, curlSays: "alert protocol version",
              curlArguments: ["--tlsv1.2"], appError: "-1200/-9836"),
    FaultCase(option: "--fault", host: "tls11.test", kind: "tls1.1", curlExit: 35, curlSays: "alert protocol version",
              curlArguments: ["--tlsv1.2"], appError: "-1200/-9836"),
    // A client that offers only forward-secret suites (ATS's list): no suite in common.
    FaultCase(option: "--fault", host: "nofs.test", kind: "no-forward-secrecy", curlExit: 35,
              curlSays: "handshake failure",
              curlArguments: ["--tls-max", "1.2", "--ciphers",
                              "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-AES256-GCM-SHA384"],
              appError: "-1200/-9824"),
    FaultCase(option: "--fault", host: "reset.test", kind: "reset", curlExit: 35, curlSays: "Connection reset by peer",
              appError: "-1005"),
    // curl gives up first (as an app's request times out): the proxy never answered its ClientHello.
    FaultCase(option: "--fault", host: "timeout.test", kind: "timeout", curlExit: 28, curlSays: "timed out",
              curlArguments: ["--max-time", "1"], appError: "-1001"),
    FaultCase(option: "--fault", host: "offline.test", kind: "offline", curlExit: 56,
              curlSays: "CONNECT tunnel failed, response 502", appError: "-1009"),
    FaultCase(option: "--fault", host: "dns.test", kind: "dns", curlExit: 56,
              curlSays: "CONNECT tunnel failed, response 502", appError: "-1003"),
    FaultCase(option: "--block-list", host: "refused.test", kind: "refuse", curlExit: 56,
              curlSays: "CONNECT tunnel failed, response 502", appError: "-1004"),
    FaultCase(option: "--block-list", host: "blocked.test", kind: "reset", curlExit: 35,
              curlSays: "Connection reset by peer", appError: "-1005"),
]

@Suite("--fault and --block-list: each KIND as a strict client meets it, one proxy for all")
struct FaultTests {
    @Test("Every KIND fails curl and openssl s_client as the flawed server or network would; nothing reaches the origin")
    func everyKind() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "good", in: folder)
        defer { withExtendedLifetime(origin) {} }  // the origin stops when released
        let capture = folder.appendingPathComponent("faults.atscap").path
        // Every faulted host is mapped to the origin too: a fault not applied would reach it and succeed.
        var arguments = ["--capture", capture, "--client-timeout", "5", "--diagnostics", "1"] + origin.map("good.test")
        arguments += ["--fault", "pinned.test=pin-mismatch"] + origin.map("pinned.test")
        // A host the policy lets load over http://, so the request reaches the connection point (not a -1022).
        let plist = e2e.packageRoot.appendingPathComponent("config/media-server.plist").path
        arguments += ["--plist", plist, "--fault", "media-server.example.com=offline"] + origin.map("media-server.example.com")
        for c in cases {
            arguments += [c.option, c.kind == "reset" && c.option == "--block-list" ? c.host : "\(c.host)=\(c.kind)"]
            arguments += origin.map(c.host)
        }
        let proxy = try await Proxy(e2e, arguments, in: folder)
        func viaProxy(_ arguments: [String]) async throws -> CurlResult {
            try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA] + arguments, in: folder)
        }
        func sClient(_ host: String, _ extra: [String] = []) async throws -> String {
            let r = try await runProcess(
                "/usr/bin/openssl",
                ["s_client", "-proxy", proxy.address, "-connect", "\(host):443", "-servername", host,
                 "-CAfile", e2e.proxyCA] + extra,
                in: folder, timeout: .seconds(20))
            return r.stdout + r.stderr
        }

        // The control: a host with no rule is relayed to the origin.
        #expect(try await viaProxy(["https://good.test/bytes/10"]).status == 200)

        for c in cases {
            let r = try await viaProxy(c.curlArguments + ["https://\(c.host)/"])
            #expect(r.exit == c.curlExit, "\(c.host) \(c.kind): \(r.stderr)")
            #expect(r.stderr.contains(c.curlSays), "\(c.host) \(c.kind): \(r.stderr)")
            if let code = c.verifyCode {
                let out = try await sClient(c.host, ["-verify_hostname", c.host])
                #expect(out.contains("Verify return code: \(code)"), "\(c.host): \(out)")
            }
            if c.curlExit == 56 {
                // The CONNECT's 502 names the injected failure.
                #expect(r.header("X-ATS-Injected-Fault") == (c.option == "--block-list" ? "block \(c.kind)" : c.kind),
                        "\(r.headerText)")
            }
        }

        // A plain http:// request is failed by its host too, without contacting the origin.
        let plain = try await viaProxy(["http://media-server.example.com/bytes/10"])
        #expect(plain.status == 502 && plain.header("X-ATS-Injected-Fault") == "offline", "\(plain.headerText)")

        // A lax client meets the flawed server itself: TLS 1.0 with a suite of its time, static RSA key exchange.
        let lax10 = try await sClient("tls10.test", ["-tls1", "-cipher", "DEFAULT@SECLEVEL=0"])
        #expect(lax10.contains("Protocol  : TLSv1\n") || lax10.contains("Protocol: TLSv1\n"), "\(lax10)")
        let laxNoFS = try await sClient("nofs.test", ["-tls1_2"])
        #expect(laxNoFS.contains("Cipher is AES128-GCM-SHA256") || laxNoFS.contains("Cipher is AES256-GCM-SHA384"),
                "\(laxNoFS)")
        // Past its handshake, a lax client's request is answered by the proxy, never by the origin.
        let answered = try await viaProxy(["--tlsv1.0", "--tls-max", "1.0", "--ciphers", "DEFAULT@SECLEVEL=0",
                                           "https://tls10.test/bytes/10"])
        #expect(answered.status == 502 && answered.header("X-ATS-Injected-Fault") == "tls1.0", "\(answered.stderr)")

        // pin-mismatch: a valid leaf from the proxy's CA (it verifies), whose key is not the one the proxy's leaves
        // usually carry: a client pinned to that key fails (curl 90), as an app pinned to its server's key would.
        let pinned = try await sClient("pinned.test", ["-verify_hostname", "pinned.test"])
        #expect(pinned.contains("Verify return code: 0 (ok)"), "\(pinned)")
        let spki = "openssl s_client -proxy \(proxy.address) -connect good.test:443 -servername good.test </dev/null "
            + "2>/dev/null | openssl x509 -pubkey -noout | openssl pkey -pubin -outform der "
            + "| openssl dgst -sha256 -binary | base64"
        let usualKey = try await runProcess("/bin/sh", ["-c", spki], in: folder)
        let pin = "sha256//" + usualKey.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try await viaProxy(["--pinnedpubkey", pin, "https://good.test/bytes/10"]).status == 200)
        let mismatch = try await viaProxy(["--pinnedpubkey", pin, "https://pinned.test/"])
        #expect(mismatch.exit == 90, "\(mismatch.stderr)")

        // Each failure is one console line that says it was injected, with the rule and the app's error.
        let lines = try await proxy.process.waitForOutput { text -> [Substring]? in
            let lines = text.split(separator: "\n")
            return cases.allSatisfy { c in lines.contains { $0.hasPrefix("CONNECT https://\(c.host) ") } } ? lines : nil
        }
        for c in cases {
            let line = lines.first { $0.hasPrefix("CONNECT https://\(c.host) ") } ?? ""
            #expect(line.contains("(injected by a rule, not the server's: "), "\(line)")
            #expect(line.contains("the app gets \(c.appError))"), "\(line)")
            #expect(line.contains(" RULE [\(c.option) #"), "\(line)")
        }
        kill(proxy.process.pid, SIGINT)
        #expect(try await proxy.process.waitForExit() == 0)
        // The trace (--diagnostics) says so too, before the app's failure.
        let trace = proxy.process.stderr
        #expect(trace.contains("Injected Failure") && trace.contains("not contacted"), "\(trace.suffix(2000))")
        #expect(trace.contains("Code=-1009 \"The Internet connection appears to be offline.\""), "\(trace.suffix(2000))")

        // The report leaves injected failures out of its findings: only the control host is judged.
        let report = try await runProcess(e2e.binary, ["report", capture, "--format", "json"], in: folder)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any])
        let hosts = (json["hosts"] as? [[String: Any]] ?? []).compactMap { $0["host"] as? String }
        #expect(hosts == ["good.test"], "\(report.stdout)")
        let notes = json["notes"] as? [String] ?? []
        #expect(notes.contains { $0.hasSuffix("failed on purpose by a rule (--fault, --block-list) left out: the failure was injected, not the server's") },
                "\(notes)")
        let shown = try await runProcess(e2e.binary, ["show", capture, "--json"], in: folder)
        let injected = try shown.stdout.split(separator: "\n").filter { line in
            (try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["action"] as? String
                == "injected"
        }
        #expect(injected.count >= cases.count, "\(shown.stdout)")
    }
}
