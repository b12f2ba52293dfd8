import Foundation
import TestSupport
import Testing

/// Runs `openssl` to completion; throws with its stderr when it fails.
@discardableResult
private func openssl(_ arguments: [String]) throws -> String {
    let run = try runCommand("openssl", arguments)
    guard run.status == 0 else {
        throw DiagnoseTestError(message: "openssl \(arguments.first ?? ""): \(run.stderrText)")
    }
    return run.stdoutText
}

private struct DiagnoseTestError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

/// The CA made by `atsproxy ca init`, and leaves it signs with the openssl CLI.
private final class DiagnosePKI: Sendable {
    let dir: ScratchDirectory
    var caPEM: String { dir.path("ca/atsproxy-ca.pem") }

    static let shared: DiagnosePKI? = try? DiagnosePKI()

    init() throws {
        dir = try ScratchDirectory()
        let r = try runATSProxy(["ca", "init", "--ca-dir", dir.path("ca")])
        guard r.status == 0 else { throw DiagnoseTestError(message: "ca init: \(r.stderr)") }
    }

    /// A leaf for `san` signed by the CA (or self-signed); returns (cert, key) paths.
    func leaf(
        _ name: String, san: String?, key: [String] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
        days: Int = 300, selfSigned: Bool = false, backdate: Bool = false, digest: String = "-sha256"
    ) throws -> (String, String) {
        let cert = dir.path("\(name).pem"), keyPath = dir.path("\(name)-key.pem")
        var ext = "extendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
        if let san { ext += "subjectAltName=\(san)\n" }
        try ext.write(toFile: dir.path("\(name).ext"), atomically: true, encoding: .utf8)
        if selfSigned {
            var args = ["req", "-x509"] + key + ["-nodes", "-keyout", keyPath, "-out", cert, "-subj", "/CN=\(name)",
                "-days", "\(days)"]
            if let san { args += ["-addext", "subjectAltName=\(san)"] }
            try openssl(args)
            return (cert, keyPath)
        }
        try openssl(["req", "-new"] + key + ["-nodes", "-keyout", keyPath, "-out", dir.path("\(name).csr"), "-subj", "/CN=\(name)"])
        if backdate {
            // Expired (valid from 60 to 30 days ago): `openssl x509` in 3.0 has no -not_before, `openssl ca` does.
            let db = dir.path("\(name)-db")
            try FileManager.default.createDirectory(atPath: db, withIntermediateDirectories: true)
            try "".write(toFile: db + "/index.txt", atomically: true, encoding: .utf8)
            try "01\n".write(toFile: db + "/serial", atomically: true, encoding: .utf8)
            try """
                [ca]
                default_ca = d
                [d]
                database = \(db)/index.txt
                new_certs_dir = \(db)
                serial = \(db)/serial
                default_md = sha256
                policy = p
                unique_subject = no
                [p]
                commonName = supplied
                """.write(toFile: db + "/ca.cnf", atomically: true, encoding: .utf8)
            try openssl([
                "ca", "-batch", "-notext", "-config", db + "/ca.cnf", "-cert", caPEM, "-keyfile",
                dir.path("ca/atsproxy-ca-key.pem"), "-in", dir.path("\(name).csr"), "-out", cert, "-startdate",
                stamp(-60), "-enddate", stamp(-30), "-extfile", dir.path("\(name).ext"),
            ])
            return (cert, keyPath)
        }
        // A random serial per leaf: tests run in parallel, so a shared -CAcreateserial file would race.
        let serial = "0x" + String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(30))
        let sign = [
            "x509", "-req", "-in", dir.path("\(name).csr"), "-CA", caPEM, "-CAkey", dir.path("ca/atsproxy-ca-key.pem"),
            "-set_serial", serial, digest, "-extfile", dir.path("\(name).ext"), "-out", cert, "-days", "\(days)",
        ]
        try openssl(sign)
        return (cert, keyPath)
    }

    private func stamp(_ days: Int) -> String {
        var t = time_t(Date().addingTimeInterval(Double(days) * 86400).timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(
            format: "%04d%02d%02d%02d%02d%02dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
            parts.tm_min, parts.tm_sec)
    }
}

@Suite("atsproxy diagnose")
struct DiagnoseCLITests {
    private let pki: DiagnosePKI

    init() throws { pki = try #require(DiagnosePKI.shared) }

    private func diagnose(_ server: OpenSSLServer, host: String, _ extra: [String] = [], trust: Bool = true) throws
        -> (status: Int32, out: String, err: String)
    {
        var args = ["diagnose", "https://\(host):\(server.port)/", "--connect-to", "127.0.0.1", "--timeout", "5"]
        if trust { args += ["--trust-ca", pki.caPEM] }
        let r = try runATSProxy(args + extra)
        return (r.status, String(decoding: r.stdout, as: UTF8.self), r.stderr)
    }

    /// The result line that follows test `name` in the output.
    private func result(_ out: String, _ name: String) -> String? {
        let lines = out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let i = lines.firstIndex(of: name) else { return nil }
        return lines[(i + 1)...].first { $0.hasPrefix("Result : ") }
    }

    @Test("a compliant TLS 1.3 server passes everything; nscurl's layout; exit 0")
    func compliantServer() throws {
        let (cert, key) = try pki.leaf("good.test", san: "DNS:good.test")
        let s = try OpenSSLServer(certificate: cert, key: key, arguments: ["-tls1_3"])
        let r = try diagnose(s, host: "good.test")
        #expect(r.status == 0)
        #expect(r.out.hasPrefix("Starting ATS Diagnostics\n\nConfiguring ATS Info.plist keys"))
        #expect(r.out.contains("Use '--verbose' to view the ATS dictionaries used"))
        let separators = r.out.split(separator: "\n").filter { $0 == String(repeating: "=", count: 80) }
        #expect(separators.count == 8)
        let titles = [
            "Default ATS Secure Connection", "Allowing Arbitrary Loads", "Configuring TLS exceptions for good.test",
            "Configuring PFS exceptions for good.test",
            "Configuring PFS exceptions and allowing insecure HTTP for good.test",
            "Configuring TLS exceptions with PFS disabled for good.test",
            "Configuring TLS exceptions with PFS disabled and insecure HTTP allowed for good.test",
        ]
        let positions = titles.compactMap { r.out.range(of: "\n\($0)\n---\n")?.lowerBound }
        #expect(positions.count == 7)
        #expect(positions == positions.sorted())
        #expect(result(r.out, "ATS Default Connection") == "Result : PASS")
        #expect(result(r.out, "TLSv1.3") == "Result : PASS")
        #expect(r.out.contains("None: the default ATS connection to good.test passes."))
        #expect(!r.out.contains("ATS Dictionary:"))
        #expect(r.err.isEmpty, "no progress line when stderr is not a terminal")
    }

    @Test("TLS 1.0-only server: FAIL with -1200/-9836, TLSv1.0 rows PASS, the TLSv1.0 exception is recommended")
    func tls10OnlyServer() throws {
        let (cert, key) = try pki.leaf("old.test", san: "DNS:old.test")
        let s = try OpenSSLServer(certificate: cert, key: key, arguments: ["-tls1", "-cipher", "ALL:@SECLEVEL=0"])
        let r = try diagnose(s, host: "old.test", ["--ios", "17", "--verbose"])
        #expect(r.status == 1)
        #expect(result(r.out, "ATS Default Connection") == "Result : FAIL")
        #expect(result(r.out, "TLSv1.0") == "Result : PASS")
        #expect(result(r.out, "TLSv1.2") == "Result : FAIL")
        #expect(result(r.out, "Allow All Loads") == "Result : PASS")
        #expect(r.out.contains("ATS Dictionary:\n{\n}\nResult : FAIL\nError : Error Domain=NSURLErrorDomain Code=-1200"))
        #expect(r.out.contains("_kCFStreamErrorDomainKey=3, _kCFStreamErrorCodeKey=-9836"))
        #expect(r.out.contains("""
            {
                NSExceptionDomains =     {
                    "old.test" =         {
                        NSExceptionMinimumTLSVersion = "TLSv1.0";
                    };
                };
            }
            """))
        #expect(r.out.contains("Server supports: TLSv1.0;"))
        #expect(r.out.contains("the server sent the alert protocol_version (70)"))
        #expect(r.out.contains("Narrowest passing test: TLSv1.0\n"))
        #expect(r.out.contains("ATS refuses the default connection:\n  - server supports only TLSv1.0"))
        #expect(r.out.contains("<key>NSExceptionMinimumTLSVersion</key>\n        <string>TLSv1.0</string>"))
        #expect(!r.out.contains("Use '--verbose'"))

        let ios26 = try diagnose(s, host: "old.test", ["--ios", "26"])
        #expect(ios26.status == 1)
        #expect(result(ios26.out, "TLSv1.0") == "Result : FAIL")
        #expect(ios26.out.contains("No Info.plist exception can make this connection pass"))
        #expect(ios26.out.contains("The iOS TLS stack refuses the default connection:"))
    }

    @Test("static-RSA-only server: only PFS-disabled rows pass; NSExceptionRequiresForwardSecrecy = NO is recommended")
    func nonForwardSecretServer() throws {
        let (cert, key) = try pki.leaf("rsa.test", san: "DNS:rsa.test", key: ["-newkey", "rsa:2048"])
        let s = try OpenSSLServer(certificate: cert, key: key, arguments: ["-cipher", "AES128-SHA", "-no_tls1_3"])
        let r = try diagnose(s, host: "rsa.test", ["--ios", "17"])
        #expect(r.status == 1)
        #expect(result(r.out, "Disabling Perfect Forward Secrecy") == "Result : PASS")
        #expect(result(r.out, "TLSv1.2 with PFS disabled") == "Result : PASS")
        #expect(result(r.out, "TLSv1.2") == "Result : FAIL")
        #expect(r.out.contains("forward secrecy: no"))
        #expect(r.out.contains("iOS 17 default connection: offers TLSv1.2, TLSv1.3 with 13 cipher suites, all forward secret; requires TLSv1.2 or later, forward secrecy"))
        #expect(r.out.contains("Narrowest passing test: Disabling Perfect Forward Secrecy"))
        #expect(r.out.contains("<key>NSExceptionRequiresForwardSecrecy</key>\n        <false/>"))
    }

    @Test(
        "certificate problems no exception can fix",
        arguments: ["expired", "selfsigned", "wronghost", "nosan", "rsa1024", "sha1"])
    func certificateProblems(kind: String) throws {
        let host = "\(kind).test"
        let leaf: (String, String)
        var serverArgs: [String] = []
        switch kind {
        case "expired": leaf = try pki.leaf(host, san: "DNS:\(host)", backdate: true)
        case "selfsigned": leaf = try pki.leaf(host, san: "DNS:\(host)", selfSigned: true)
        case "wronghost": leaf = try pki.leaf(host, san: "DNS:other.example")
        case "nosan": leaf = try pki.leaf(host, san: nil)
        case "sha1":
            leaf = try pki.leaf(host, san: "DNS:\(host)", digest: "-sha1")
            serverArgs = ["-cipher", "ALL:@SECLEVEL=0"]
        default:
            leaf = try pki.leaf(host, san: "DNS:\(host)", key: ["-newkey", "rsa:1024"])
            serverArgs = ["-cipher", "ALL:@SECLEVEL=0"]
        }
        let s = try OpenSSLServer(certificate: leaf.0, key: leaf.1, arguments: serverArgs)
        let r = try diagnose(s, host: host, ["--verbose"])
        #expect(r.status == 1)
        #expect(result(r.out, "ATS Default Connection") == "Result : FAIL")
        #expect(r.out.contains("Error : Error Domain=NSURLErrorDomain Code=-1202"))
        #expect(!r.out.contains("Result : PASS"), "not even Allow All Loads: default trust still applies")
        #expect(r.out.contains("No Info.plist exception can make this connection pass"))
        #expect(r.out.contains("Default server trust refuses the default connection:"), "not ATS: §3.3, §3.4")
        #expect(!r.out.contains("ATS refuses"))
        switch kind {
        case "expired": #expect(r.out.contains("Trust: untrusted (expired)"))
        case "selfsigned": #expect(r.out.contains("Trust: untrusted (selfSigned)"))
        case "wronghost", "nosan": #expect(r.out.contains("host name does NOT match the SAN"))
        case "sha1": #expect(r.out.contains("signed with SHA1"))
        default: #expect(r.out.contains("has an RSA-1024 key"))
        }
    }

    @Test("an IP literal ATS exempts (§2.4): default trust, not ATS, refuses the name mismatch; verdict unchanged")
    func ipLiteralNameMismatch() throws {
        let (cert, key) = try pki.leaf("named.test", san: "DNS:named.test")
        let s = try OpenSSLServer(certificate: cert, key: key)
        let r = try runATSProxy([
            "diagnose", "https://127.0.0.1:\(s.port)/", "--timeout", "5", "--trust-ca", pki.caPEM, "--verbose",
        ])
        let out = String(decoding: r.stdout, as: UTF8.self)
        #expect(r.status == 1)
        #expect(result(out, "ATS Default Connection") == "Result : FAIL")
        #expect(result(out, "Allow All Loads") == "Result : FAIL")
        #expect(out.contains("Error : Error Domain=NSURLErrorDomain Code=-1202"))
        #expect(out.contains("ATS's checks do not apply to this host: 127.0.0.1 is "))
        #expect(out.contains("Default server trust refuses the default connection:\n  - certificate names named.test"))
        #expect(!out.contains("ATS refuses"))
    }

    @Test("--json carries the matrix, the capabilities and the recommendation")
    func json() throws {
        let (cert, key) = try pki.leaf("json.test", san: "DNS:json.test")
        let s = try OpenSSLServer(certificate: cert, key: key, arguments: ["-tls1_2"])
        let r = try diagnose(s, host: "json.test", ["--json"])
        #expect(r.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.out.utf8)) as? [String: Any])
        #expect(object["host"] as? String == "json.test")
        #expect((object["sections"] as? [[Any]])?.count == 7)
        let caps = try #require(object["capabilities"] as? [String: Any])
        #expect(caps["supportedVersions"] as? [Int] == [0x0303])
        #expect(object["recommendation"] != nil)
    }

    @Test("--plist judges the app's own policy for the host")
    func appPolicy() throws {
        let (cert, key) = try pki.leaf("app.test", san: "DNS:app.test")
        let s = try OpenSSLServer(certificate: cert, key: key, arguments: ["-tls1_1", "-cipher", "ALL:@SECLEVEL=0"])
        let plist = pki.dir.path("app-ats.plist")
        try """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0"><dict>
            <key>NSAppTransportSecurity</key><dict><key>NSExceptionDomains</key><dict>
            <key>app.test</key><dict><key>NSExceptionMinimumTLSVersion</key><string>TLSv1.1</string></dict>
            </dict></dict></dict></plist>
            """.write(toFile: plist, atomically: true, encoding: .utf8)
        let r = try diagnose(s, host: "app.test", ["--ios", "17", "--plist", plist])
        #expect(r.status == 1, "the default connection still fails")
        let section = try #require(r.out.range(of: "The app's own policy\n---\n"))
        let rest = r.out[section.upperBound...]
        #expect(rest.contains("Result : PASS"))
        #expect(rest.contains("NSExceptionDomains › app.test"))
        #expect(r.out.contains("Narrowest passing test: TLSv1.1\n"))
    }

    @Test("--fail-on-policy: the exit status follows the app's own policy, not the default connection")
    func failOnPolicy() throws {
        let (cert, key) = try pki.leaf("policy.test", san: "DNS:policy.test")
        let s = try OpenSSLServer(certificate: cert, key: key, arguments: ["-tls1_1", "-cipher", "ALL:@SECLEVEL=0"])
        func plist(_ minimum: String) throws -> String {
            let path = pki.dir.path("policy-\(minimum).plist")
            try """
                <?xml version="1.0" encoding="UTF-8"?>
                <plist version="1.0"><dict>
                <key>NSAppTransportSecurity</key><dict><key>NSExceptionDomains</key><dict>
                <key>policy.test</key><dict><key>NSExceptionMinimumTLSVersion</key><string>\(minimum)</string></dict>
                </dict></dict></dict></plist>
                """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        // The app allows TLS 1.1 for the host: its policy passes although the default connection fails.
        let allows = try diagnose(s, host: "policy.test", ["--ios", "17", "--plist", try plist("TLSv1.1"), "--fail-on-policy"])
        #expect(allows.status == 0, "\(allows.out)")
        // The app asks for TLS 1.2: the app would fail, so CI must.
        let refuses = try diagnose(s, host: "policy.test", ["--ios", "17", "--plist", try plist("TLSv1.2"), "--fail-on-policy"])
        #expect(refuses.status == 1, "\(refuses.out)")
        // Without the flag, the default connection decides, as before.
        #expect(try diagnose(s, host: "policy.test", ["--ios", "17", "--plist", try plist("TLSv1.1")]).status == 1)
        let usage = try runATSProxy(["diagnose", "https://policy.test/", "--fail-on-policy"])
        #expect(usage.status == 64)
        #expect(usage.stderr.contains("--fail-on-policy judges the app's own policy: give it with --plist"))
    }

    @Test("a server that answers every ClientHello with plain HTTP: exit 2, one line saying it does not speak TLS")
    func plainHTTPServer() throws {
        let s = try RawTCPServer(.http)
        let r = try runATSProxy([
            "diagnose", "https://plain.test:\(s.port)/", "--connect-to", "127.0.0.1", "--timeout", "5", "--verbose",
        ])
        #expect(r.status == 2)
        #expect(
            r.stderr
                == "atsproxy diagnose: the server at 127.0.0.1:\(s.port) answered the TLS ClientHello with bytes that "
                + "are not TLS (plain HTTP, for example): it does not speak TLS there; a URLSession load would fail "
                + "with NSURLErrorSecureConnectionFailed (-1200)\n")
        #expect(r.stdout.isEmpty, "the matrix does not run")
    }

    @Test("a server that closes every connection at once: exit 2, one line saying it closed them, no matrix")
    func closingServer() throws {
        let s = try RawTCPServer(.close)
        let r = try runATSProxy([
            "diagnose", "https://closing.test:\(s.port)/", "--connect-to", "127.0.0.1", "--timeout", "5", "--verbose",
        ])
        #expect(r.status == 2)
        #expect(
            r.stderr
                == "atsproxy diagnose: the server at 127.0.0.1:\(s.port) closed every connection during the TLS "
                + "handshake without a TLS answer: it does not seem to speak TLS there; a URLSession load would fail "
                + "with NSURLErrorSecureConnectionFailed (-1200)\n")
        #expect(r.stdout.isEmpty, "the matrix does not run")
        #expect(!r.stderr.contains("check it with `diagnose`"))
    }

    @Test("a server that accepts TCP and never answers: exit 2 after one timeout per probe, -1001 named")
    func silentServer() throws {
        let s = try RawTCPServer(.silent)
        let start = Date()
        let r = try runATSProxy(
            ["diagnose", "https://silent.test:\(s.port)/", "--connect-to", "127.0.0.1", "--timeout", "1"], limit: 60)
        let elapsed = Date().timeIntervalSince(start)
        #expect(r.status == 2)
        #expect(r.stderr.contains("answered no TLS ClientHello within 1 s"))
        #expect(r.stderr.contains("NSURLErrorTimedOut (-1001)"))
        #expect(!r.stderr.contains("-9807") && r.stdout.isEmpty)
        // Four version probes of 1 s each; the matrix does not run.
        #expect(elapsed < 9, "took \(elapsed) s")
    }

    @Test("--timeout bounds the whole handshake: a server trickling one byte at a time still times out")
    func tricklingServer() throws {
        let s = try RawTCPServer(.trickle)
        let start = Date()
        let r = try runATSProxy(
            ["diagnose", "https://trickle.test:\(s.port)/", "--connect-to", "127.0.0.1", "--timeout", "1"], limit: 60)
        let elapsed = Date().timeIntervalSince(start)
        #expect(r.status == 2)
        #expect(r.stderr.contains("NSURLErrorTimedOut (-1001)"))
        #expect(elapsed < 9, "took \(elapsed) s")
    }

    @Test("--connect-to ADDR:PORT replaces the URL's port; SNI and certificate checks keep the URL's host")
    func connectToWithPort() throws {
        let (cert, key) = try pki.leaf("mapped.test", san: "DNS:mapped.test")
        let s = try OpenSSLServer(certificate: cert, key: key)
        let r = try runATSProxy([
            "diagnose", "https://mapped.test/", "--connect-to", "127.0.0.1:\(s.port)", "--timeout", "5",
            "--trust-ca", pki.caPEM,
        ])
        let out = String(decoding: r.stdout, as: UTF8.self)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(result(out, "ATS Default Connection") == "Result : PASS")
        #expect(out.contains("Note: Connected to 127.0.0.1:\(s.port) (--connect-to); SNI, certificate checks and ATS"))
        #expect(!out.contains("nscurl always tests the URL as given"), "the URL's own port is 443")
    }

    @Test("--connect-to [::1]:PORT reaches an IPv6 server")
    func connectToIPv6() throws {
        let s = try RawTCPServer(.http, host: "::1")
        let r = try runATSProxy([
            "diagnose", "https://v6.test/", "--connect-to", "[::1]:\(s.port)", "--timeout", "5", "--verbose",
        ])
        #expect(r.status == 2, "\(r.stderr)")
        #expect(
            r.stderr.hasPrefix("atsproxy diagnose: the server at [::1]:\(s.port) answered the TLS ClientHello with "),
            "the plain-HTTP server on ::1 answered: \(r.stderr)")
    }

    @Test("a malformed --connect-to is a usage error naming the value and the accepted forms")
    func connectToInvalid() throws {
        for value in ["127.0.0.1:99999", "https://127.0.0.1:8443", "[::1"] {
            let r = try runATSProxy(["diagnose", "https://x.test/", "--connect-to", value])
            #expect(r.status == 64)
            #expect(r.stderr.contains("--connect-to \(value): "))
            #expect(r.stderr.contains("expected ADDR or ADDR:PORT"))
        }
    }

    /// A negative number after a space is the option's value, not a flag: it gets the option's own range message,
    /// as `--timeout=-1` does, instead of "Missing value".
    @Test(arguments: [
        (["--timeout", "-1"], "--timeout must be more than 0 and at most 86400 seconds (got -1.0)"),
        (["--ios", "-1"], "--ios must be 9 or later (got -1)"),
    ])
    func negativeNumbersReachValidation(args: [String], message: String) throws {
        let r = try runATSProxy(["diagnose", "https://x.test/"] + args)
        #expect(r.status == 64)
        #expect(r.stderr.contains("Error: \(message)"), "\(r.stderr)")
        #expect(!r.stderr.contains("Missing value"), "\(r.stderr)")
    }

    /// Taking the next word unconditionally leaves ordinary parsing alone: a flag after a numeric value is still a
    /// flag, and a flag where the number belongs is named as the bad value.
    @Test func numericOptionsStillParseAmongFlags() throws {
        let parsed = try runATSProxy(["diagnose", "https://x.test/", "--timeout", "5", "--ios", "8"])
        #expect(parsed.status == 64)
        #expect(parsed.stderr.contains("Error: --ios must be 9 or later (got 8)"), "\(parsed.stderr)")
        let swallowed = try runATSProxy(["diagnose", "https://x.test/", "--timeout", "--json"])
        #expect(swallowed.status == 64)
        #expect(
            swallowed.stderr.contains("The value '--json' is invalid for '--timeout <timeout>'"), "\(swallowed.stderr)")
    }

    @Test("unreachable server or bad URL: exit 2 with a message")
    func cannotRun() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, len) == 0 && getsockname(listener, $0, &len) == 0 }
        }
        let port = Int(UInt16(bigEndian: addr.sin_port))
        close(listener)  // the port is now closed: connecting is refused
        let r = try runATSProxy(["diagnose", "https://closed.test:\(port)/", "--connect-to", "127.0.0.1"])
        #expect(r.status == 2)
        #expect(r.stderr == "atsproxy diagnose: cannot connect to 127.0.0.1:\(port): Connection refused\n")
        let bad = try runATSProxy(["diagnose", "http://plain.test/"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("https://"))
    }
}
