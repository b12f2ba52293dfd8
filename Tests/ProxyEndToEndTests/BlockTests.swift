import Foundation
import TestSupport
import Testing

/// A certificate flaw, the host the origin serves it for, and the SSL code the app would see.
struct CertificateCase: Sendable, CustomStringConvertible {
    var certificate: String
    var host: String
    var sslCode: String
    var description: String { certificate }
}

@Suite("Blocks fail the client the way the app would fail")
struct BlockTests {
    /// Starts a TLS 1.0-only origin for `tls10.test` and a proxy under Apple's defaults with `arguments`.
    private func tls10Scene(_ arguments: [String]) async throws -> (E2E, URL, Origin, Proxy) {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "tls10", tls10: true, in: folder)
        let proxy = try await Proxy(e2e, origin.map("tls10.test") + arguments, in: folder)
        return (e2e, folder, origin, proxy)
    }

    @Test("--block tls: a TLS 1.0-only origin makes curl fail with exit 35 and a protocol_version alert")
    func tls10BlockTLS() async throws {
        let (e2e, folder, origin, proxy) = try await tls10Scene(["--block", "tls"])
        defer { withExtendedLifetime(origin) {} }  // the origin stops when released
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://tls10.test/"], in: folder)
        #expect(r.exit == 35, "\(r.stderr)")
        #expect(r.stderr.contains("alert protocol version"), "\(r.stderr)")
        // openssl s_client, through the same CONNECT, sees the same alert.
        let s = try await runProcess(
            "/usr/bin/openssl",
            ["s_client", "-proxy", proxy.address, "-connect", "tls10.test:443", "-servername", "tls10.test",
             "-CAfile", e2e.proxyCA],
            in: folder, timeout: .seconds(30))
        #expect(s.status != 0)
        #expect((s.stdout + s.stderr).contains("alert protocol version"), "\(s.stdout)\n\(s.stderr)")
        #expect(proxy.process.isRunning)
    }

    @Test("--block http: a TLS 1.0-only origin gives 502 with -1200 and -9836")
    func tls10BlockHTTP() async throws {
        let (e2e, folder, origin, proxy) = try await tls10Scene(["--block", "http"])
        defer { withExtendedLifetime(origin) {} }  // the origin stops when released
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://tls10.test/"], in: folder)
        #expect(r.exit == 0, "\(r.stderr)")
        #expect(r.status == 502)
        #expect(r.header("X-ATS-Error") == "-1200 NSURLErrorSecureConnectionFailed")
        #expect(r.header("X-ATS-SSL-Error") == "-9836 errSSLPeerProtocolVersion")
    }

    @Test("--block http: the answer, its NSError and the trace name the request's own URL; the trace ends in Did Fail")
    func blockHTTPNamesTheRequest() async throws {
        let (e2e, folder, origin, proxy) = try await tls10Scene(["--block", "http", "--diagnostics", "1"])
        defer { withExtendedLifetime(origin) {} }  // the origin stops when released
        let url = "https://tls10.test/some/path?q=1"
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, url], in: folder)
        #expect(r.status == 502)
        #expect(r.bodyText.contains("URL:  \(url)\n"), "\(r.bodyText)")
        #expect(r.bodyText.contains("NSErrorFailingURLKey=\(url)"), "\(r.bodyText)")
        // Users do not have the project's private notes: the answer and the trace quote none of their ids.
        #expect(PrivateReferenceIDs.found(in: r.headerText + r.bodyText) == [], "\(r.headerText)\(r.bodyText)")
        let trace = try await proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("Did Fail") ? text : nil
        }
        #expect(PrivateReferenceIDs.found(in: trace) == [], "\(trace)")
        #expect(trace.contains("Response Error"))
        #expect(trace.contains("NSErrorFailingURLKey=\(url)"), "\(trace)")
        // The app's task failed in the handshake: no request was enqueued and no response received.
        #expect(!trace.contains("Protocol Enqueue"), "\(trace)")
        #expect(!trace.contains("Protocol Received"), "\(trace)")
    }

    @Test("--ats annotate: the TLS 1.0 origin's real 200 carries X-ATS-Verdict and X-ATS-Error")
    func annotate() async throws {
        let (e2e, folder, origin, proxy) = try await tls10Scene(["--ats", "annotate", "--diagnostics", "1"])
        defer { withExtendedLifetime(origin) {} }  // the origin stops when released
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://tls10.test/"], in: folder)
        #expect(r.exit == 0, "\(r.stderr)")
        #expect(r.status == 200)
        #expect(r.bodyText == "hello\n")
        #expect(r.header("X-ATS-Verdict") == "violation")
        #expect(r.header("X-ATS-Error") == "-1200 NSURLErrorSecureConnectionFailed")
        let trace = try await proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("Did Finish") ? text : nil
        }
        #expect(trace.contains("annotated: relayed, although the app refuses this connection"), "\(trace)")
    }

    static let certificateCases = [
        CertificateCase(certificate: "expired", host: "expired.test", sslCode: "-9814"),
        CertificateCase(certificate: "wronghost", host: "wronghost.test", sslCode: "-9843"),
        CertificateCase(certificate: "selfsigned", host: "selfsigned.test", sslCode: "-9813"),
        CertificateCase(certificate: "sha1", host: "sha1.test", sslCode: "-9802"),
        CertificateCase(certificate: "rsa1024", host: "rsa1024.test", sslCode: "-9802"),
    ]

    @Test("A flawed origin certificate: --block tls makes curl fail its own verification (exit 60); --block http gives 502 -1202",
          arguments: certificateCases)
    func certificateFlaw(_ c: CertificateCase) async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: c.certificate, in: folder)
        let tlsProxy = try await Proxy(e2e, origin.map(c.host) + ["--block", "tls"], in: folder)
        let r = try await curl(["-x", tlsProxy.url, "--cacert", e2e.proxyCA, "https://\(c.host)/"], in: folder)
        #expect(r.exit == 60, "\(r.stderr)")
        // The console line names the blocked connection with its codes.
        let line = try await tlsProxy.process.waitForLine(
            startingWith: "CONNECT https://\(c.host)", timeout: .seconds(5))
        #expect(line.contains("ATS BLOCKED -1202/\(c.sslCode)"), "\(line)")
        #expect(!tlsProxy.process.stderr.contains("fell back"), "\(tlsProxy.process.stderr)")
        // A client that accepts the flawed leaf anyway (curl -k) still gets no upstream content: the block answer,
        // and its console line says why.
        let insecure = try await curl(["-k", "-x", tlsProxy.url, "https://\(c.host)/"], in: folder)
        #expect(insecure.status == 502, "\(insecure.stderr)")
        #expect(insecure.header("X-ATS-Error") == "-1202 NSURLErrorServerCertificateUntrusted")
        let answered = try await tlsProxy.process.waitForLine(
            startingWith: "GET https://\(c.host)/ 502", timeout: .seconds(5))
        #expect(answered.hasSuffix("its TLS library does not check that, or its checks are off)"), "\(answered)")
        // That connection completed its handshake: it is no refused connection, and has no CONNECT line of its own.
        // Ctrl-C writes every pending line before the proxy exits.
        kill(tlsProxy.process.pid, SIGINT)
        try await tlsProxy.process.waitForExit()
        let connects = tlsProxy.process.stdout.split(separator: "\n").filter { $0.hasPrefix("CONNECT https://") }
        #expect(connects.count == 1, "\(connects)")

        let httpProxy = try await Proxy(e2e, origin.map(c.host) + ["--block", "http"], in: folder)
        let h = try await curl(["-x", httpProxy.url, "--cacert", e2e.proxyCA, "https://\(c.host)/"], in: folder)
        #expect(h.exit == 0, "\(h.stderr)")
        #expect(h.status == 502)
        #expect(h.header("X-ATS-Error") == "-1202 NSURLErrorServerCertificateUntrusted")
        #expect(h.header("X-ATS-SSL-Error")?.hasPrefix(c.sslCode + " ") == true, "\(h.headerText)")
    }

    /// Leaves whose flaw only Apple's TLS stack checks: curl (OpenSSL) accepts the proxy's flawed copy.
    static let fallbackCases: [(certificate: String, host: String, arguments: [String], flaw: String)] = [
        ("longlived", "longlived.test", [], "valid for 900 days"),
        ("noeku", "noeku.test", ["--user-root-eku", "documentedStrict"], "without the serverAuth EKU"),
    ]

    @Test("--block tls with a flaw curl does not check: the 502 answer it falls back to says so, with the reason",
          arguments: fallbackCases)
    func blockTLSFallback(_ c: (certificate: String, host: String, arguments: [String], flaw: String)) async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: c.certificate, in: folder)
        let proxy = try await Proxy(e2e, origin.map(c.host) + ["--block", "tls"] + c.arguments, in: folder)
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://\(c.host)/"], in: folder)
        #expect(r.exit == 0, "\(r.stderr)")
        #expect(r.status == 502)
        #expect(r.header("X-ATS-Error") == "-1202 NSURLErrorServerCertificateUntrusted")
        let body = try String(contentsOf: r.body, encoding: .utf8)
        #expect(
            body.contains(
                "Why an HTTP answer rather than a failed TLS handshake (--block tls): this client accepted the proxy's "
                    + "certificate although it carries the server's flaw (\(c.flaw))"), "\(body)")
        let line = try await proxy.process.waitForLine(startingWith: "GET https://\(c.host)/ 502", timeout: .seconds(5))
        #expect(
            line.hasSuffix(
                "(--block tls fallback: the client accepted the flawed leaf (\(c.flaw)): its TLS library does not "
                    + "check that, or its checks are off)"), "\(line)")
        // The connection was not refused in its handshake, so there is no blocked CONNECT line for it.
        kill(proxy.process.pid, SIGINT)
        try await proxy.process.waitForExit()
        #expect(!proxy.process.stdout.contains("CONNECT https://\(c.host)"), "\(proxy.process.stdout)")
        #expect(
            proxy.process.stderr.contains(
                "\(c.host):443: --block tls fell back to answering requests 502: the client accepted the flawed leaf "
                    + "(\(c.flaw))"), "\(proxy.process.stderr)")
    }

    @Test("http:// to a host that needs TLS: 403 with -1022 and no SSL code; the plist's exception host gets 200")
    func cleartext() async throws {
        let stage = try await Stage(["--map", "plain.test=127.0.0.1:1"])
        let blocked = try await stage.curl(["http://plain.test/bytes/10"])
        #expect(blocked.status == 403)
        #expect(blocked.bodyText.hasPrefix("ATSProxy refused this request without connecting to the server"))
        #expect(blocked.header("X-ATS-Error") == "-1022 NSURLErrorAppTransportSecurityRequiresSecureConnection")
        #expect(blocked.header("X-ATS-SSL-Error") == nil)
        let allowed = try await stage.curl(["http://\(Stage.plainHost)/bytes/10"])
        #expect(allowed.status == 200)
        #expect(try await stage.matchesAnnouncedChecksum(allowed))
        // Host names are case-insensitive: the exception (and the --map) apply to the name however it is spelled.
        let shouted = try await stage.curl(["http://\(Stage.plainHost.uppercased())/bytes/10"])
        #expect(shouted.status == 200, "\(shouted.headerText)")
        let shoutedBlocked = try await stage.curl(["http://PLAIN.Test/bytes/10"])
        #expect(shoutedBlocked.status == 403)
    }

    @Test("An unreachable upstream: 502 -1004 (-1003 for no such host), not an ATS verdict; IPv6 URLs bracketed")
    func unreachable() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        // A 70-letter label is no DNS name: the resolver refuses it without sending a query (traffic stays local).
        let unresolvable = String(repeating: "a", count: 70) + ".invalid"
        let proxy = try await Proxy(
            e2e, ["--map", "dead.test=127.0.0.1:1", "--map", "typo.test=\(unresolvable):443"], in: folder)
        let dead = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://dead.test/"], in: folder)
        #expect(dead.status == 502, "\(dead.stderr)")
        #expect(dead.header("X-ATS-Error") == "-1004 NSURLErrorCannotConnectToHost")
        #expect(dead.header("X-ATS-Verdict") == "unreachable")
        #expect(dead.bodyText.hasPrefix("ATSProxy could not reach the server"), "\(dead.bodyText)")
        // The message names where --map sent the host.
        #expect(dead.bodyText.contains("(mapped to 127.0.0.1:1)"), "\(dead.bodyText)")
        let typo = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://typo.test/"], in: folder)
        #expect(typo.status == 502, "\(typo.stderr)")
        #expect(typo.header("X-ATS-Error") == "-1003 NSURLErrorCannotFindHost")
        _ = try await proxy.process.waitForOutput {
            $0.contains("https://typo.test/ 502 HTTP/1.1 FAILED -1003") ? true : nil
        }
        // Nothing listens on [::1] at this port (it was just free on 127.0.0.1 and is not bound on ::1).
        let port = try freeLoopbackPort()
        let v6 = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://[::1]:\(port)/"], in: folder)
        #expect(v6.status == 502, "\(v6.stderr)")
        #expect(v6.bodyText.contains("URL:  https://[::1]:\(port)/\n"), "\(v6.bodyText)")
    }

    @Test("An upstream that accepts and never answers: after --handshake-timeout the client gets 502 -1001, logged")
    func silentUpstream() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let silent = try SilentListener()
        let proxy = try await Proxy(
            e2e, ["--map", "silent.test=127.0.0.1:\(silent.port)", "--handshake-timeout", "1"], in: folder)
        let started = ContinuousClock.now
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://silent.test/x"], in: folder)
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(r.status == 502, "\(r.stderr)")
        #expect(r.header("X-ATS-Error") == "-1001 NSURLErrorTimedOut")
        #expect(r.header("X-ATS-Verdict") == "unreachable")
        _ = try await proxy.process.waitForOutput {
            $0.contains("https://silent.test/x 502 HTTP/1.1 FAILED -1001") ? true : nil
        }
        #expect(proxy.process.stderr.contains("no TLS handshake from the server within 1.0 seconds"))
        withExtendedLifetime(silent) {}
    }

    @Test("--ats annotate: a cleartext request is forwarded, and its 200 and the trace say so, not that it was refused")
    func annotateCleartext() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, in: folder)
        let proxy = try await Proxy(
            e2e, origin.map("plain.test") + ["--ats", "annotate", "--diagnostics", "1"], in: folder)
        let r = try await curl(["-x", proxy.url, "http://plain.test/bytes/10"], in: folder)
        #expect(r.status == 200)
        #expect(r.header("X-ATS-Verdict") == "violation")
        #expect(r.header("X-ATS-Error")?.hasPrefix("-1022 ") == true)
        #expect(
            r.header("X-ATS-Violation")
                == "cleartextNotAllowed: cleartext http:// load of plain.test: ATS requires a secure connection to "
                + "this host", "\(r.headerText)")
        let trace = try await proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("Did Finish") ? text : nil
        }
        #expect(
            trace.contains("annotated: forwarded, although the app refuses this load before connecting"), "\(trace)")
        #expect(!trace.contains("refused before connecting"), "\(trace)")
    }

    @Test("--ats annotate with a server that speaks no TLS: a 502 that says why, not a TLS alert")
    func annotateNonTLSServer() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, in: folder)  // plain HTTP where https:// is asked for
        let proxy = try await Proxy(e2e, origin.map("notls.test") + ["--ats", "annotate"], in: folder)
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://notls.test/"], in: folder)
        #expect(r.exit == 0, "\(r.stderr)")
        #expect(r.status == 502)
        #expect(r.header("X-ATS-Error") == "-1200 NSURLErrorSecureConnectionFailed", "\(r.headerText)")
        // The client trusted the proxy's CA: no notice blames the certificate.
        #expect(!proxy.process.stderr.contains("the client's TLS handshake failed"), "\(proxy.process.stderr)")
    }
}
