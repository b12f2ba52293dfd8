import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One upstream weakness: the `openssl s_server` that has it, the clients standing in for a strict and a lax device,
/// and what each must meet through `--ats mirror`.
struct MirrorCase: Sendable, CustomStringConvertible {
    var name: String
    /// The test PKI's leaf the origin serves, and the host it is for.
    var certificate: String
    var host: String
    var serverArguments: [String]
    /// s_client arguments of a device that refuses the weakness, and the alert the proxy then records (nil: any).
    var strict: [String]
    var strictRefusal: String?
    /// s_client arguments of a device that accepts it.
    var lax: [String]
    /// What the lax client must report: `Protocol  : X` and `Cipher    : Y` (nil: not checked).
    var protocolSeen: String?
    var cipherSeen: String?
    /// What the lax client's verification reported, when it goes on despite an error.
    var verifyError: String?
    /// The leaf's `openssl x509 -text` must contain each of these.
    var leafText: [String] = []
    var description: String { name }
}

@Suite("--ats mirror: the device meets the upstream's weakness and its verdict is recorded", .serialized)
struct MirrorTests {
    static let seclevel0 = ["-cipher", "DEFAULT@SECLEVEL=0"]
    /// In a client's arguments: report verification errors but go on (no -verify_return_error).
    static let laxVerify = "LAX_VERIFY"

    static let cases: [MirrorCase] = [
        MirrorCase(
            name: "TLS 1.0 only", certificate: "good", host: "good.test",
            serverArguments: ["-tls1"] + seclevel0, strict: ["-tls1_2"], strictRefusal: "protocol_version",
            lax: ["-tls1"] + seclevel0, protocolSeen: "TLSv1", cipherSeen: "ECDHE-RSA-AES256-SHA",
            leafText: ["Public-Key: (2048 bit)"]),
        MirrorCase(
            name: "TLS 1.1 only", certificate: "good", host: "good.test",
            serverArguments: ["-tls1_1"] + seclevel0, strict: ["-tls1_2"], strictRefusal: "protocol_version",
            lax: ["-tls1_1"] + seclevel0, protocolSeen: "TLSv1.1", cipherSeen: "ECDHE-RSA-AES256-SHA"),
        MirrorCase(
            name: "RSA key exchange only", certificate: "good", host: "good.test",
            serverArguments: ["-no_tls1_3", "-cipher", "AES128-GCM-SHA256"],
            strict: ["-tls1_2", "-cipher", "ECDHE"], strictRefusal: "handshake_failure",
            lax: ["-tls1_2"], protocolSeen: "TLSv1.2", cipherSeen: "AES128-GCM-SHA256"),
        MirrorCase(
            name: "CBC only", certificate: "good", host: "good.test",
            serverArguments: ["-no_tls1_3", "-cipher", "ECDHE-RSA-AES128-SHA256"],
            strict: ["-tls1_2", "-cipher", "ECDHE+AESGCM"], strictRefusal: "handshake_failure",
            lax: ["-tls1_2"], protocolSeen: "TLSv1.2", cipherSeen: "ECDHE-RSA-AES128-SHA256"),
        MirrorCase(
            name: "RSA-1024 leaf", certificate: "rsa1024", host: "rsa1024.test", serverArguments: seclevel0,
            strict: [], strictRefusal: nil, lax: seclevel0, protocolSeen: "TLSv1.3",
            leafText: ["Public-Key: (1024 bit)"]),
        MirrorCase(
            name: "SHA-1 leaf", certificate: "sha1", host: "sha1.test", serverArguments: seclevel0,
            strict: [], strictRefusal: nil, lax: seclevel0,
            // Signed by the proxy CA's P-256 key with SHA-1; the leaf's own key is the upstream's type and size.
            leafText: ["Signature Algorithm: ecdsa-with-SHA1", "Public-Key: (2048 bit)"]),
        MirrorCase(
            name: "expired", certificate: "expired", host: "expired.test", serverArguments: [],
            strict: [], strictRefusal: "certificate_expired",
            // A device that reports verification errors but goes on; the leaf carries the upstream's own dates.
            lax: [Self.laxVerify], verifyError: "Verify return code: 10 (certificate has expired)",
            leafText: ["Not Before: Jan  1 00:00:00 2020 GMT", "Not After : Feb  1 00:00:00 2020 GMT"]),
        MirrorCase(
            name: "not yet valid", certificate: "notyet", host: "notyet.test", serverArguments: [],
            strict: [], strictRefusal: "bad_certificate", lax: [Self.laxVerify],
            verifyError: "Verify return code: 9 (certificate is not yet valid)"),
        MirrorCase(
            name: "wrong name", certificate: "wronghost", host: "wronghost.test", serverArguments: [],
            strict: ["-verify_hostname", "wronghost.test"], strictRefusal: "bad_certificate",
            lax: ["-verify_hostname", "other.test"], leafText: ["DNS:other.test"]),
        MirrorCase(
            name: "self-signed", certificate: "selfsigned", host: "selfsigned.test", serverArguments: [],
            strict: [], strictRefusal: "unknown_ca", lax: ["-CAfile", "NEVER_TRUSTED"],
            leafText: ["Issuer: O = ATSProxy, CN = \"ATSProxy never-trusted CA"]),
    ]

    /// A mirror-mode proxy in front of an s_server with the case's weakness (and `-www`, so a request gets a 200).
    private func scene(_ c: MirrorCase, _ extra: [String] = []) async throws
        -> (E2E, URL, OpenSSLServer, Proxy, URL)
    {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let (cert, key) = e2e.cert(c.certificate)
        let chain = c.certificate == "selfsigned" ? nil : e2e.testCA
        let server = try OpenSSLServer(
            certificate: cert, key: key, chain: chain, arguments: ["-www"] + c.serverArguments)
        let log = folder.appendingPathComponent("mirror.jsonl")
        let proxy = try await Proxy(
            e2e, ["--ats", "mirror", "--ios", "17", "--map", "\(c.host)=127.0.0.1:\(server.port)", "--log-json",
                log.path] + extra, in: folder)
        return (e2e, folder, server, proxy, log)
    }

    /// `openssl s_client` through the proxy's CONNECT, verifying against the proxy CA (unless `arguments` names
    /// another -CAfile); it sends `GET /` once connected. `direct`: to the origin at that port instead, without the
    /// proxy, verifying against the test CA that signed the origins' leaves.
    private func sClient(
        _ e2e: E2E, _ proxy: Proxy, _ host: String, _ arguments: [String], direct: Int? = nil, in folder: URL
    ) async throws -> ProcessResult {
        let request = folder.appendingPathComponent("request-\(UUID().uuidString.prefix(6)).txt")
        try "GET / HTTP/1.0\r\nHost: \(host)\r\n\r\n".write(to: request, atomically: true, encoding: .utf8)
        var args = arguments
        if let i = args.firstIndex(of: "NEVER_TRUSTED") {
            args[i] = e2e.caDir.appendingPathComponent("never-trusted/atsproxy-ca.pem").path
        }
        if !args.contains("-CAfile") { args += ["-CAfile", direct == nil ? e2e.proxyCA : e2e.testCA] }
        let verify = args.contains(Self.laxVerify) ? [] : ["-verify_return_error"]
        args.removeAll { $0 == Self.laxVerify }
        // s_client reads its request from stdin: run it under sh with a redirect (TestProcess gives /dev/null).
        let route = direct.map { ["-connect", "127.0.0.1:\($0)"] }
            ?? ["-proxy", proxy.address, "-connect", "\(host):443"]
        let command = (["openssl", "s_client"] + route + ["-servername", host, "-ign_eof"] + verify + args)
            .map(shellQuote).joined(separator: " ")
        return try await runProcess("/bin/sh", ["-c", "\(command) < \(shellQuote(request.path))"], in: folder,
            timeout: .seconds(30))
    }

    private func shellQuote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// The leaf s_client printed, as `openssl x509 -text` shows it.
    private func leafText(_ output: String, in folder: URL) async throws -> String {
        guard let start = output.range(of: "-----BEGIN CERTIFICATE-----"),
            let end = output.range(of: "-----END CERTIFICATE-----", range: start.upperBound..<output.endIndex)
        else { throw HarnessError("s_client printed no certificate: \(output)") }
        let pem = folder.appendingPathComponent("leaf-\(UUID().uuidString.prefix(6)).pem")
        try String(output[start.lowerBound..<end.upperBound]).write(to: pem, atomically: true, encoding: .utf8)
        let r = try await runProcess("/usr/bin/openssl", ["x509", "-in", pem.path, "-noout", "-text"], in: folder)
        return r.stdout
    }

    /// The `mirror` object of the CONNECT exchanges in the JSON log, waiting (bounded) for `count` of them.
    private func mirrorRecords(_ log: URL, count: Int) async throws -> [[String: Any]] {
        let events = try await jsonEvents(log) { events in
            events.filter { ($0["exchange"] as? [String: Any])?["method"] as? String == "CONNECT" }.count >= count
        }
        return events.compactMap { event -> [String: Any]? in
            guard let exchange = event["exchange"] as? [String: Any], exchange["method"] as? String == "CONNECT"
            else { return nil }
            return exchange["mirror"] as? [String: Any]
        }
    }

    @Test("Each weakness: a strict s_client refuses it, a lax one meets it (version, suite, leaf), both recorded",
        arguments: cases)
    func weakness(_ c: MirrorCase) async throws {
        let (e2e, folder, server, proxy, log) = try await scene(c)
        defer { withExtendedLifetime(server) {} }
        let strict = try await sClient(e2e, proxy, c.host, c.strict, in: folder)
        #expect(strict.status != 0, "the strict client connected: \(strict.stdout)")
        let lax = try await sClient(e2e, proxy, c.host, c.lax, in: folder)
        #expect(lax.status == 0, "\(lax.stdout)\n\(lax.stderr)")
        #expect(lax.stdout.contains("HTTP/1.0 200 ok"), "\(lax.stdout)")
        if let p = c.protocolSeen { #expect(lax.stdout.contains("Protocol  : \(p)\n"), "\(lax.stdout)") }
        if let s = c.cipherSeen { #expect(lax.stdout.contains("Cipher    : \(s)\n"), "\(lax.stdout)") }
        let leaf = try await leafText(lax.stdout, in: folder)
        for text in c.leafText { #expect(leaf.contains(text), "\(leaf)") }
        // The minted leaf is the proxy's (or the never-trusted CA's), never the upstream's own certificate.
        #expect(leaf.contains("O = ATSProxy"), "\(leaf)")

        let records = try await mirrorRecords(log, count: 2)
        try #require(records.count == 2, "\(records)")
        #expect(records[0]["deviceAccepted"] as? Bool == false, "\(records[0])")
        if let alert = c.strictRefusal { #expect(records[0]["refusal"] as? String == alert, "\(records[0])") }
        #expect(records[1]["deviceAccepted"] as? Bool == true, "\(records[1])")
        if let v = c.verifyError { #expect(lax.stdout.contains(v), "\(lax.stdout)") }
        // Each client meets what it meets connecting directly: the strict one fails there too, and the lax one
        // negotiates the same version (and, where the protocol is the weakness, the same suite) and reports the same
        // verification error. A TLS 1.3 server with a flawed leaf is served the proxy's own TLS 1.3 suites.
        let strictDirect = try await sClient(e2e, proxy, c.host, c.strict, direct: server.port, in: folder)
        #expect(strictDirect.status != 0, "directly, the strict client connected: \(strictDirect.stdout)")
        if !c.lax.contains("NEVER_TRUSTED") {
            let laxDirect = try await sClient(e2e, proxy, c.host, c.lax, direct: server.port, in: folder)
            #expect(laxDirect.status == 0, "\(laxDirect.stdout)\(laxDirect.stderr)")
            for field in ["Protocol  : ", "Verify return code: "] + (c.cipherSeen == nil ? [] : ["Cipher    : "]) {
                let seen = { (text: String) in text.split(separator: "\n").first { $0.contains(field) } }
                #expect(seen(lax.stdout) == seen(laxDirect.stdout), "\(field) through the proxy and directly")
            }
        }
        // The console lines (written in batches) say the same.
        let lines = try await proxy.process.waitForOutput { text in
            text.contains("→ device refused (") && text.contains("→ device accepted") ? text : nil
        }
        #expect(lines.contains("CONNECT https://\(c.host) --- TLS MIRROR "), "\(lines)")
    }

    @Test("A TLS 1.0-only server: curl --tlsv1.2 and Python's defaults refuse; curl --tls-max 1.0 and Python with a lowered minimum meet TLS 1.0")
    func tls10WithCurlAndPython() async throws {
        let c = Self.cases[0]
        let (e2e, folder, server, proxy, log) = try await scene(c)
        defer { withExtendedLifetime(server) {} }
        let strictCurl = try await curl(
            ["-x", proxy.url, "--cacert", e2e.proxyCA, "--tlsv1.2", "https://good.test/"], in: folder)
        #expect(strictCurl.exit == 35, "\(strictCurl.stderr)")
        let laxCurl = try await curl(
            ["-x", proxy.url, "--cacert", e2e.proxyCA, "--tlsv1.0", "--tls-max", "1.0", "--ciphers",
                "DEFAULT@SECLEVEL=0", "https://good.test/"], in: folder)
        #expect(laxCurl.exit == 0, "\(laxCurl.stderr)")
        #expect(laxCurl.status == 200)

        let path = URL(fileURLWithPath: E2EScript.path("mirror_tls_client.py"))
        let python = try TestPython.path()
        for (mode, ok) in [("strict", false), ("lax", true)] {
            let r = try await runProcess(python, [path.path, String(proxy.port), e2e.proxyCA, mode], in: folder)
            let line = r.stdout.split(separator: "\n").last.map(String.init) ?? ""
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["ok"] as? Bool == ok, "\(mode): \(r.stdout)\(r.stderr)")
            if ok { #expect(object?["version"] as? String == "TLSv1", "\(line)") }
        }
        let records = try await mirrorRecords(log, count: 4)
        #expect(records.map { $0["deviceAccepted"] as? Bool } == [false, true, false, true], "\(records)")
        #expect(records.allSatisfy { $0["version"] as? String == "TLSv1.0" }, "\(records)")
        #expect(records[1]["deviceVersion"] as? String == "TLSv1.0", "\(records[1])")
    }

    @Test("A 900-day leaf and a leaf without EKU: OpenSSL accepts both, the minted leaf carries the flaw")
    func flawsOpenSSLDoesNotCheck() async throws {
        for (certificate, host, text, absent) in [
            ("long900", "long900.test", "leaf valid 900 days", nil as String?),
            ("noeku", "noeku.test", "leaf no EKU", "X509v3 Extended Key Usage"),
        ] {
            let c = MirrorCase(
                name: certificate, certificate: certificate, host: host, serverArguments: [], strict: [],
                strictRefusal: nil, lax: [])
            let (e2e, folder, server, proxy, log) = try await scene(c)
            defer { withExtendedLifetime(server) {} }
            let r = try await sClient(e2e, proxy, host, [], in: folder)
            #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
            let leaf = try await leafText(r.stdout, in: folder)
            if let absent { #expect(!leaf.contains(absent), "\(leaf)") }
            let records = try await mirrorRecords(log, count: 1)
            #expect((records.first?["weaknesses"] as? [String])?.contains(text) == true, "\(records)")
            #expect(records.first?["deviceAccepted"] as? Bool == true)
            // The minted leaf has the upstream leaf's own validity dates.
            let upstream = try await runProcess(
                "/usr/bin/openssl", ["x509", "-in", e2e.cert(certificate).cert, "-noout", "-text"], in: folder)
            for field in ["Not Before:", "Not After :"] {
                let line = upstream.stdout.split(separator: "\n").first { $0.contains(field) }
                let expected = try #require(line).trimmingCharacters(in: .whitespaces)
                #expect(certificate != "long900" || leaf.contains(expected), "\(expected) in \(leaf)")
            }
        }
    }

    @Test("A healthy upstream is served exactly as today: TLS 1.3 and the proxy's own P-256 leaf")
    func healthy() async throws {
        let c = MirrorCase(
            name: "good", certificate: "good", host: "good.test", serverArguments: [], strict: [], strictRefusal: nil,
            lax: [])
        let (e2e, folder, server, proxy, log) = try await scene(c)
        defer { withExtendedLifetime(server) {} }
        let r = try await sClient(e2e, proxy, "good.test", [], in: folder)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("Protocol  : TLSv1.3\n"), "\(r.stdout)")
        let leaf = try await leafText(r.stdout, in: folder)
        #expect(leaf.contains("ASN1 OID: prime256v1"), "\(leaf)")
        #expect(leaf.contains("TLS Web Server Authentication"), "\(leaf)")
        let records = try await mirrorRecords(log, count: 1)
        #expect(records.first?["weaknesses"] as? [String] == [], "\(records)")
        let lines = try await proxy.process.waitForOutput { text in
            text.contains("GET https://good.test/") ? text : nil
        }
        #expect(
            lines.contains("CONNECT https://good.test --- TLS MIRROR TLSv1.3 → device accepted TLSv1.3"), "\(lines)")
    }

    @Test("--plist: a wrong plist (no exception for a TLS 1.0 server the app reaches) is a disagreement; a strict device agrees; the exit summary counts both")
    func twoVerdicts() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let plist = folder.appendingPathComponent("Info.plist")
        try Data(PlistFixture.xml("<dict><key>NSAppTransportSecurity</key><dict/></dict>")).write(to: plist)
        let c = Self.cases[0]
        let capture = folder.appendingPathComponent("mirror.atscap").path
        let (_, _, server, proxy, log) = try await scene(
            c, ["--plist", plist.path, "--diagnostics", "1", "--capture", capture])
        defer { withExtendedLifetime(server) {} }
        _ = try await sClient(e2e, proxy, c.host, c.strict, in: folder)
        let lax = try await sClient(e2e, proxy, c.host, c.lax, in: folder)
        #expect(lax.status == 0, "\(lax.stderr)")
        let records = try await mirrorRecords(log, count: 2)
        try #require(records.count == 2)
        #expect(records[0]["disagreement"] == nil, "a strict device agrees with the simulation: \(records[0])")
        let simulated = records[1]["simulated"] as? String ?? ""
        #expect(simulated.hasPrefix("blocked -1200/-9836 ("), "\(records[1])")
        let disagreement = records[1]["disagreement"] as? String ?? ""
        #expect(disagreement.hasPrefix("simulated: blocked -1200/-9836 ("), "\(disagreement)")
        #expect(disagreement.contains("; device: accepted TLSv1.0; either the app's effective policy differs from the "
            + "plist, or iOS behaves differently than modelled (reference §3.1)"), "\(disagreement)")
        // The request's own line carries the disagreement too.
        let lines = try await proxy.process.waitForOutput { text in
            text.contains("GET https://good.test/ 200") ? text : nil
        }
        #expect(lines.contains("ATS VIOLATION -1200/-9836 MIRROR TLSv1.0"), "\(lines)")
        #expect(lines.contains("[DISAGREEMENT simulated: blocked"), "\(lines)")
        #expect(proxy.process.stderr.contains("mirror disagreement: simulated: blocked"), "\(proxy.process.stderr)")
        // The trace has the device's verdict as a record of its own.
        #expect(proxy.process.stderr.contains("Mirror Device Verdict"), "\(proxy.process.stderr)")
        #expect(proxy.process.stderr.contains("Device: accepted TLSv1.0"), "\(proxy.process.stderr)")
        kill(proxy.process.pid, SIGINT)
        _ = try await proxy.process.waitForExit(timeout: .seconds(20))
        #expect(proxy.process.stderr.contains(
            "atsproxy: mirror summary: 2 connections, the device accepted 1, refused 1; 1 agreed with the "
                + "simulation, 1 disagreed\n  tlsVersionTooLow: accepted 1, refused 1; agreed 1, disagreed 1"),
            "\(proxy.process.stderr)")
        // The capture keeps each connection's device verdict: `report` counts them as the exit summary did.
        let report = try await runProcess(e2e.binary, ["report", capture], in: folder)
        #expect(report.stdout.contains(
            "Device verdicts (--ats mirror): mirror summary: 2 connections, the device accepted 1, refused 1; 1 agreed "
                + "with the simulation, 1 disagreed\n  tlsVersionTooLow: accepted 1, refused 1; agreed 1, disagreed 1"),
            "\(report.stdout) \(report.stderr)")
        #expect(report.stdout.contains("DISAGREEMENT https://\(c.host): simulated: blocked -1200/-9836 ("), "\(report.stdout)")
        let json = try await runProcess(e2e.binary, ["report", capture, "--json"], in: folder)
        let document = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        let total = (document?["mirror"] as? [String: Any])?["total"] as? [String: Any]
        #expect(total?["agreements"] as? Int == 1 && total?["disagreements"] as? Int == 1, "\(json.stdout)")
    }
}

extension MirrorTests {
    @Test("curl checks the host name after the handshake: its close before any request is recorded as a refusal")
    func curlHostNameCheck() async throws {
        let c = MirrorCase(
            name: "wrong name", certificate: "wronghost", host: "wronghost.test", serverArguments: [], strict: [],
            strictRefusal: nil, lax: [])
        let (e2e, folder, server, proxy, log) = try await scene(c)
        defer { withExtendedLifetime(server) {} }
        let strict = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://wronghost.test/"], in: folder)
        #expect(strict.exit == 60, "\(strict.stderr)")
        #expect(strict.stderr.contains("wronghost.test"), "\(strict.stderr)")
        let lax = try await curl(["-x", proxy.url, "-k", "https://wronghost.test/"], in: folder)
        #expect(lax.exit == 0 && lax.status == 200, "\(lax.stderr)")
        let records = try await mirrorRecords(log, count: 2)
        try #require(records.count == 2)
        #expect(records[0]["deviceAccepted"] as? Bool == false)
        #expect(records[0]["refusal"] as? String == "closed after the handshake", "\(records[0])")
        #expect(records[1]["deviceAccepted"] as? Bool == true, "\(records[1])")
        #expect((records[1]["weaknesses"] as? [String]) == ["leaf names other.test"], "\(records[1])")
    }
}

extension MirrorTests {
    @Test("A cleartext request the device sends was allowed by its ATS: with a plist that refuses it, a disagreement")
    func cleartext() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let plist = folder.appendingPathComponent("Info.plist")
        try Data(PlistFixture.xml("<dict><key>NSAppTransportSecurity</key><dict/></dict>")).write(to: plist)
        let origin = try await Origin(e2e, in: folder)
        defer { withExtendedLifetime(origin) {} }
        let proxy = try await Proxy(
            e2e, ["--ats", "mirror", "--plist", plist.path] + origin.map("plain.test"), in: folder)
        let r = try await curl(["-x", proxy.url, "http://plain.test/bytes/10"], in: folder)
        #expect(r.status == 200, "\(r.stderr)")
        let lines = try await proxy.process.waitForOutput { text in
            text.contains("GET http://plain.test/bytes/10 200") ? text : nil
        }
        #expect(lines.contains("ATS VIOLATION -1022 MIRROR cleartext HTTP → device accepted"), "\(lines)")
        #expect(lines.contains("[DISAGREEMENT simulated: blocked -1022 ("), "\(lines)")
        #expect(lines.contains("device: sent the cleartext request"), "\(lines)")
    }
}

extension MirrorTests {
    @Test("Only the mirrored connection is weakened: a healthy host on the same proxy keeps TLS 1.3 and strict clients")
    func otherConnectionsKeepDefaults() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let (oldCert, oldKey) = e2e.cert("tls10")
        let old = try OpenSSLServer(
            certificate: oldCert, key: oldKey, chain: e2e.testCA, arguments: ["-www", "-tls1"] + Self.seclevel0)
        let (goodCert, goodKey) = e2e.cert("good")
        let good = try OpenSSLServer(certificate: goodCert, key: goodKey, chain: e2e.testCA, arguments: ["-www"])
        defer { withExtendedLifetime((old, good)) {} }
        let proxy = try await Proxy(
            e2e, ["--ats", "mirror", "--map", "tls10.test=127.0.0.1:\(old.port)", "--map",
                "good.test=127.0.0.1:\(good.port)"], in: folder)
        let mirrored = try await sClient(e2e, proxy, "tls10.test", ["-tls1"] + Self.seclevel0, in: folder)
        #expect(mirrored.stdout.contains("Protocol  : TLSv1\n"), "\(mirrored.stdout)")
        // Right after it, the healthy host: the strictest default client, TLS 1.3, the proxy's P-256 leaf.
        let healthy = try await sClient(e2e, proxy, "good.test", ["-tls1_3"], in: folder)
        #expect(healthy.status == 0, "\(healthy.stdout)\(healthy.stderr)")
        #expect(healthy.stdout.contains("Protocol  : TLSv1.3\n"), "\(healthy.stdout)")
        #expect(try await leafText(healthy.stdout, in: folder).contains("ASN1 OID: prime256v1"))
        // And the mirrored host again, by a client that will not go below TLS 1.2: still refused.
        let strict = try await sClient(e2e, proxy, "tls10.test", ["-tls1_2"], in: folder)
        #expect(strict.status != 0, "\(strict.stdout)")
    }
}
