import Foundation
import Testing

/// Runs the built `atsproxy explain` as a user would.
struct ExplainCLITests {
    static let browserPolicy = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <dict>
            <key>NSAllowsArbitraryLoads</key>
            <true/>
            <key>NSExceptionDomains</key>
            <dict>
                <key>api.example.com</key>
                <dict>
                    <key>NSExceptionAllowsInsecureHTTPLoads</key>
                    <false/>
                </dict>
                <key>old.example.com</key>
                <dict>
                    <key>NSExceptionMinimumTLSVersion</key>
                    <string>TLSv1.0</string>
                </dict>
            </dict>
        </dict>
        </plist>
        """

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Writes `policy` to a fresh temp folder and runs `atsproxy explain --plist <file> args…`; with `plist` false,
    /// `atsproxy explain args…` without `--plist`.
    func explain(policy: String? = browserPolicy, plist: Bool = true, _ args: [String]) throws -> Run {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("explain-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("ats.plist")
        if let policy { try Data(policy.utf8).write(to: file) }
        let run = try runATSProxy(["explain"] + (plist ? ["--plist", file.path] : []) + args)
        return Run(status: run.status, stdout: String(decoding: run.stdout, as: UTF8.self), stderr: run.stderr)
    }

    @Test("a refused http:// URL: -1022, the deciding entry, the fix, exit status 1")
    func blocked() throws {
        let r = try explain(["--ios", "17", "http://api.example.com/login", "https://news.example.org"])
        #expect(r.status == 1)
        #expect(r.stdout.contains("simulated on iOS 17"))
        #expect(r.stdout.contains("-1022 NSURLErrorAppTransportSecurityRequiresSecureConnection"))
        #expect(r.stdout.contains("Decided by: NSAppTransportSecurity › NSExceptionDomains › api.example.com"))
        #expect(r.stdout.contains("<key>NSExceptionAllowsInsecureHTTPLoads</key>"))
        #expect(r.stdout.contains("ATS does not apply to this host"))
    }

    @Test("allowed URLs: requirements and offered suites, exit status 0")
    func allowed() throws {
        let r = try explain(["--ios", "9", "https://old.example.com"])
        #expect(r.status == 0)
        #expect(r.stdout.contains("TLS: minimum TLSv1.0; offers TLSv1.0, TLSv1.1, TLSv1.2"))
        #expect(r.stdout.contains("0xC02C TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"))
        #expect(r.stdout.contains("Note: Cipher list: Apple's 2015 ATS list"))
    }

    @Test("--json prints one JSON document with the verdicts")
    func json() throws {
        let r = try explain(["--json", "http://api.example.com", "https://api.example.com"])
        #expect(r.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let items = try #require(object["items"] as? [[String: Any]])
        #expect(items.map { $0["verdict"] as? String } == ["blocked", "exception"])
        #expect(object["profile"] as? Int == 26)
    }

    @Test("without --plist, Apple's defaults apply, as in run: http:// refused, https:// under full ATS")
    func appleDefaults() throws {
        let r = try explain(plist: false, ["--ios", "16", "http://api.example.com/", "https://api.example.com/"])
        #expect(r.status == 1, "\(r.stderr)")
        #expect(r.stderr.isEmpty)
        #expect(r.stdout.hasPrefix("ATS policy from Apple's defaults (no --plist), simulated on iOS 14\n"))
        #expect(r.stdout.contains("  iOS 16 is simulated with the iOS 14 behaviour band\n"))
        #expect(r.stdout.contains("Verdict: BLOCKED before connecting — -1022"))
        #expect(r.stdout.contains("Verdict: may connect under full ATS"))
        #expect(r.stdout.contains("TLS: minimum TLSv1.2; offers TLSv1.2, TLSv1.3"))
    }

    @Test("a missing policy file: a clear error on stderr and exit status 2")
    func missingFile() throws {
        let r = try explain(policy: nil, ["https://a.example"])
        #expect(r.status == 2)
        #expect(r.stderr.contains("atsproxy explain:"))
        #expect(r.stdout.isEmpty)
    }

    @Test("a URL that cannot be read: exit status 2 with the reason")
    func badURL() throws {
        let r = try explain(["example.com"])
        #expect(r.status == 2)
        #expect(r.stdout.contains("Error: not a URL"))
    }

    @Test("--ios maps any version to its behaviour band; before iOS 9 is a usage error")
    func profiles() throws {
        let banded = try explain(["--ios", "16", "https://old.example.com"])
        #expect(banded.status == 0)
        #expect(banded.stdout.contains("simulated on iOS 14"))
        #expect(banded.stdout.contains("iOS 16 is simulated with the iOS 14 behaviour band"))
        let r = try explain(["--ios", "8", "https://a.example"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--ios must be 9 or later"))
    }
}
