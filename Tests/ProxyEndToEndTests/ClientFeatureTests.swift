import Foundation
import Testing

@Suite("Clients and proxy features")
struct ClientFeatureTests {
    @Test("--auth: 407 without credentials and 200 with them, for CONNECT and for absolute-form")
    func auth() async throws {
        let stage = try await Stage(["--auth", "qa:s3cret"])
        let connect = try await stage.curl(["https://\(Stage.httpsHost)/bytes/10"])
        #expect(connect.exit != 0)
        #expect(connect.headerText.contains("HTTP/1.1 407"), "\(connect.headerText) \(connect.stderr)")
        #expect(connect.header("Proxy-Authenticate")?.hasPrefix("Basic") == true)
        let connectOK = try await stage.curl(["--proxy-user", "qa:s3cret", "https://\(Stage.httpsHost)/bytes/10"])
        #expect(connectOK.status == 200, "\(connectOK.stderr)")

        let plain = try await stage.curl(["http://\(Stage.plainHost)/bytes/10"])
        #expect(plain.status == 407)
        let plainOK = try await stage.curl(["--proxy-user", "qa:s3cret", "http://\(Stage.plainHost)/bytes/10"])
        #expect(plainOK.status == 200)
        #expect(plainOK.header("X-Seen-Proxy-Headers") == "none", "Proxy-Authorization is not forwarded")
        let wrong = try await stage.curl(["--proxy-user", "qa:wrong", "http://\(Stage.plainHost)/bytes/10"])
        #expect(wrong.status == 407)
    }

    @Test("Proxy-Authorization never reaches the origin: plain, and inside an intercepted tunnel over h1 and h2")
    func credentialsNeverForwarded() async throws {
        let stage = try await Stage()
        // -H puts the field on the request itself (inside the tunnel for https://), as a client that repeats the
        // proxy's credentials on every request does.
        for url in ["http://\(Stage.plainHost)/bytes/10", "https://\(Stage.httpsHost)/bytes/10"] {
            let r = try await stage.curl(["-H", "Proxy-Authorization: Basic cWE6czNjcmV0", url])
            #expect(r.status == 200, "\(url): \(r.stderr)")
            #expect(r.header("X-Seen-Proxy-Headers") == "none", "\(url): forwarded upstream")
        }
        // An h2 client (to the HTTP/1.1 origin, through the translating relay).
        let r = try await runH2LibraryClient(
            stage.e2e, stage.proxy, host: Stage.httpsHost, alpn: ["h2"], mode: "get", ["/bytes/10"],
            extraHeaders: [["proxy-authorization", "Basic cWE6czNjcmV0"]], in: stage.folder)
        #expect(r["alpn"] as? String == "h2", "\(r)")
        let stream = (r["streams"] as? [[String: Any]])?.first ?? [:]
        #expect(stream["status"] as? Int == 200, "\(r)")
        #expect((stream["headers"] as? [String: String])?["x-seen-proxy-headers"] == "none", "\(stream)")
    }

    @Test("Proxy-Authorization inside the tunnel never reaches an HTTP/2 origin, from an h2 or an HTTP/1.1 client",
          arguments: ["--http2", "--http1.1"])
    func credentialsNeverForwardedToH2Origin(version: String) async throws {
        // nghttpd -v prints every header block it receives.
        let stage = try await H2Stage(files: ["a": 10], originArguments: ["-v"], ["--upstream-alpn", "ios"])
        let r = try await stage.curlResult(
            [version, "-H", "Proxy-Authorization: Basic cWE6czNjcmV0", "-H", "X-Probe: \(version)", stage.url("a")])
        #expect(r.status == 200, "\(r.stderr)")
        let received = try await stage.origin.process.waitForOutput { text in
            text.contains("x-probe: \(version)") ? text : nil
        }
        #expect(!received.lowercased().contains("proxy-authorization"), "\(received.suffix(2000))")
    }

    @Test("--auth: each 407 is a console line and a JSON event naming the client and missing or wrong credentials")
    func authFailuresLogged() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let log = folder.appendingPathComponent("events.jsonl")
        let stage = try await Stage(["--auth", "qa:s3cret", "--log-json", log.path])
        #expect(try await stage.curl(["https://\(Stage.httpsHost)/bytes/10"]).exit != 0)
        #expect(try await stage.curl(["--proxy-user", "qa:n0pe", "http://\(Stage.plainHost)/bytes/10"]).status == 407)
        #expect(try await stage.curl(["--proxy-user", "qa:s3cret", "http://\(Stage.plainHost)/bytes/10"]).status == 200)

        // The accepted request's exchange comes last: by then both refusals are logged, and nothing else.
        let events = try await jsonEvents(log) { $0.contains { $0["kind"] as? String == "exchange" } }
        let refusals = events.filter { $0["kind"] as? String == "proxyAuthFailed" }
        #expect(refusals.count == 2, "\(events)")
        let details = refusals.compactMap { $0["proxyAuth"] as? [String: Any] }
        #expect(details.map { $0["reason"] as? String } == ["missing", "wrong"])
        #expect(details.map { $0["method"] as? String } == ["CONNECT", "GET"])
        #expect(details.map { $0["target"] as? String }
            == ["good.test:443", "http://media-server.example.com/bytes/10"])
        let client = try Regex("^127\\.0\\.0\\.1:[0-9]+$")
        #expect(details.allSatisfy { ($0["client"] as? String)?.contains(client) == true }, "\(details)")

        let stderr = try await stage.proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("sent wrong credentials") ? text : nil
        }
        let lines = stderr.split(separator: "\n").filter { $0.hasPrefix("atsproxy: proxy authentication failed: ") }
        #expect(lines.count == 2, "\(stderr)")
        #expect(lines.first?.contains("sent no credentials (CONNECT good.test:443); answered 407") == true)
        #expect(lines.last?.hasSuffix(
            "sent wrong credentials (GET http://media-server.example.com/bytes/10); answered 407") == true)
        #expect(refusals.map { $0["message"] as? String } == lines.map { String($0.dropFirst("atsproxy: ".count)) })
        // Neither password, nor the Basic encoding of "qa:…", is in any output.
        let everything = stderr + stage.proxy.process.stdout + (try String(contentsOf: log, encoding: .utf8))
        for secret in ["s3cret", "n0pe", "cWE6"] { #expect(!everything.contains(secret), "\(secret) was logged") }
    }

    @Test("A --log-json file that cannot be written (a full disk) is reported once; the proxy goes on serving")
    func unwritableJSONLogIsReportedOnce() async throws {
        // /dev/full opens, and every write to it fails with ENOSPC, as on a full disk.
        let stage = try await Stage(["--log-json", "/dev/full"])
        for n in 1...3 {
            let r = try await stage.curl(["http://\(Stage.plainHost)/bytes/\(n)"])
            #expect(r.status == 200, "\(r.stderr)")
        }
        #expect(stage.proxy.process.isRunning)
        kill(stage.proxy.process.pid, SIGINT)
        #expect(try await stage.proxy.process.waitForExit(timeout: .seconds(20)) == 0)
        let stderr = stage.proxy.process.stderr
        let reports = stderr.split(separator: "\n").filter { $0.contains("cannot write the JSON log") }
        let expected = "atsproxy: cannot write the JSON log /dev/full: No space left on device; no more events are "
            + "written to it (the proxy goes on)"
        #expect(reports == [Substring(expected)], "\(stderr)")
    }

    @Test("Console lines still buffered when Ctrl-C comes are written before the proxy exits")
    func consoleLinesSurviveShutdown() async throws {
        let stage = try await Stage()
        for n in 1...3 {
            let r = try await stage.curl(["http://\(Stage.plainHost)/bytes/\(n)"])
            #expect(r.status == 200, "\(r.stderr)")
        }
        // At once: the lines wait up to 50 ms to share one write, so they are most likely still buffered.
        kill(stage.proxy.process.pid, SIGINT)
        #expect(try await stage.proxy.process.waitForExit(timeout: .seconds(20)) == 0)
        let lines = stage.proxy.process.stdout.split(separator: "\n").filter { $0.hasPrefix("GET http://") }
        #expect(lines.count == 3, "\(stage.proxy.process.stdout)")
        #expect(lines.last?.contains("/bytes/3 200") == true, "\(lines)")
    }

    @Test("A second Ctrl-C cuts the exchanges in flight at once, and each is logged as stopped by the shutdown")
    func secondCtrlCStopsAtOnce() async throws {
        // A drain far longer than the test: only the second signal can end it in time.
        let stage = try await Stage(["--shutdown-timeout", "60"])
        let download = try TestProcess(
            "/usr/bin/curl",
            ["-sS", "--max-time", "60", "-x", stage.proxy.url, "--cacert", stage.e2e.proxyCA, "--limit-rate", "200K",
             "-o", "/dev/null", "https://\(Stage.httpsHost)/bytes/104857600"],
            in: stage.folder, name: "slow-curl")
        defer { download.stop() }
        try await Task.sleep(for: .seconds(1))
        let started = ContinuousClock.now
        kill(stage.proxy.process.pid, SIGINT)
        try await Task.sleep(for: .milliseconds(300))
        kill(stage.proxy.process.pid, SIGINT)
        #expect(try await stage.proxy.process.waitForExit(timeout: .seconds(20)) == 0)
        // The first Ctrl-C alone would have waited 60 s for the download.
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(stage.proxy.process.stderr.contains("atsproxy: stopping now"), "\(stage.proxy.process.stderr)")
        let lines = stage.proxy.process.stdout.split(separator: "\n").filter { $0.contains("/bytes/104857600") }
        #expect(lines.count == 1, "\(stage.proxy.process.stdout)")
        #expect(lines.first?.hasSuffix("INCOMPLETE: the proxy stopped before the exchange finished") == true,
                "\(lines)")
    }

    @Test("A client that does not trust the CA: its repeated failure is one notice, and the repeats are counted")
    func repeatedNoticesAreFolded() async throws {
        let stage = try await Stage()
        let idle = try stage.proxy.resources().fds
        // Trusting the origins' CA rather than the proxy's: every handshake with the proxy fails the same way.
        for _ in 1...3 {
            let r = try await ProxyEndToEndTests.curl(
                ["-x", stage.proxy.url, "--cacert", stage.e2e.testCA, "https://\(Stage.httpsHost)/bytes/10"],
                in: stage.folder)
            #expect(r.exit == 60, "\(r.stderr)")  // CURLE_PEER_FAILED_VERIFICATION
        }
        // curl has exited, but its alert may still wait in the proxy's socket, and Ctrl-C's drain closes a
        // connection still in its handshake without reading it. The proxy closes a connection (and its upstream)
        // only after handling its failure, so wait until its descriptors are back to what they were.
        let deadline = ContinuousClock.now + .seconds(10)
        while try stage.proxy.resources().fds > idle, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(stage.proxy.process.pid, SIGINT)
        #expect(try await stage.proxy.process.waitForExit(timeout: .seconds(20)) == 0)
        let notices = stage.proxy.process.stderr.split(separator: "\n")
            .filter { $0.contains("the client's TLS handshake failed") }
        #expect(notices.count == 2, "\(stage.proxy.process.stderr)")
        #expect(notices.first?.hasSuffix("Certificate Trust Settings)") == true, "\(notices)")
        #expect(notices.last?.hasSuffix("[and 2 more times since it was last shown]") == true, "\(notices)")
    }

    @Test("A non-loopback --listen is refused without --allow-lan")
    func lanRefused() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let port = try freeLoopbackPort()
        let r = try await runProcess(
            e2e.binary, ["run", "--listen", "0.0.0.0:\(port)", "--ca-dir", e2e.caDir.path], in: folder,
            timeout: .seconds(20))
        #expect(r.status != 0)
        #expect(r.stderr.contains("--allow-lan"), "\(r.stderr)")
        #expect(!r.stdout.contains("listening"))
    }

    @Test("A --passthrough host is not intercepted: the client sees the origin's own certificate")
    func passthrough() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "passthrough", in: folder)
        let proxy = try await Proxy(e2e, origin.map("passthrough.test") + ["--passthrough", "passthrough.test"], in: folder)
        let direct = try await curl(
            ["-x", proxy.url, "--cacert", e2e.testCA, "https://passthrough.test/bytes/1024"], in: folder)
        #expect(direct.status == 200, "\(direct.stderr)")
        let viaProxyCA = try await curl(
            ["-x", proxy.url, "--cacert", e2e.proxyCA, "https://passthrough.test/bytes/1024"], in: folder)
        #expect(viaProxyCA.exit == 60, "the proxy's CA did not sign what the client got: \(viaProxyCA.stderr)")
        // Each tunnel leaves a console line when it ends, with its bytes and why it was not intercepted.
        let line = try await proxy.process.waitForLine(startingWith: "CONNECT https://passthrough.test --- TUNNEL ATS ")
        // The ServerHello, in clear in the tunnel, is judged: version and suite meet ATS.
        #expect(line.contains(" TUNNEL ATS ok "), "\(line)")
        #expect(line.hasSuffix("(tunnel, not intercepted: --passthrough passthrough.test; server chose TLSv1.3, "
            + "TLS_AES_256_GCM_SHA384, certificate not judged)"), "\(line)")
        #expect(!line.contains(" 0 B "), "the tunnel's bytes were not counted: \(line)")
    }

    @Test("--passthrough '*.api.wild.test' tunnels a subdomain; api.wild.test, mapped by a wildcard, is intercepted")
    func wildcardPassthrough() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "wild", in: folder)
        let proxy = try await Proxy(
            e2e, ["--map", "*.wild.test=127.0.0.1:\(origin.port)", "--passthrough", "*.API.wild.test."], in: folder)
        // Tunnelled: the origin's own certificate reaches the client.
        let tunnelled = try await curl(
            ["-x", proxy.url, "--cacert", e2e.testCA, "https://deep.api.wild.test/bytes/1024"], in: folder)
        #expect(tunnelled.status == 200, "\(tunnelled.stderr)")
        let line = try await proxy.process.waitForLine(
            startingWith: "CONNECT https://deep.api.wild.test --- TUNNEL ATS ")
        #expect(line.contains("(tunnel, not intercepted: --passthrough *.api.wild.test; server chose "), "\(line)")
        // Intercepted: the proxy's CA signed what the client got, and the upstream was judged under the request's
        // own name (the origin's *.wild.test certificate matches api.wild.test, not the mapped 127.0.0.1).
        let intercepted = try await curl(
            ["-x", proxy.url, "--cacert", e2e.proxyCA, "https://api.wild.test/bytes/1024"], in: folder)
        #expect(intercepted.status == 200, "\(intercepted.stderr)")
        let allowed = try await proxy.process.waitForLine(startingWith: "GET https://api.wild.test/bytes/1024 200")
        #expect(allowed.contains(" ATS ok "), "\(allowed)")
    }

    @Test("A host the app pins (NSPinnedDomains) is tunnelled untouched, with a console line saying why")
    func pinnedHost() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "passthrough", in: folder)
        let plist = try pinningPlist(for: "passthrough.test", in: folder)
        let proxy = try await Proxy(e2e, origin.map("passthrough.test") + ["--plist", plist.path], in: folder)
        // The origin's own certificate reaches the client: nothing was intercepted.
        let r = try await curl(
            ["-x", proxy.url, "--cacert", e2e.testCA, "https://passthrough.test/bytes/1024"], in: folder)
        #expect(r.status == 200, "\(r.stderr)")
        let line = try await proxy.process.waitForLine(startingWith: "CONNECT https://passthrough.test --- TUNNEL ATS ")
        #expect(line.contains("(tunnel, not intercepted: the app pins it (NSPinnedDomains › passthrough.test); "),
                "\(line)")
        #expect(proxy.process.stderr.contains("intercepting would break the pin"))
    }

    @Test("A pinned TLS 1.0 server is still tunnelled; its ServerHello makes the line a violation when it can")
    func pinnedHostJudgedFromServerHello() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "tls10", tls10: true, in: folder)
        let plist = try pinningPlist(for: "tls10.test", in: folder)
        let proxy = try await Proxy(e2e, origin.map("tls10.test") + ["--plist", plist.path], in: folder)
        /// The `number`th tunnel line, once curl with `tls` has fetched through the tunnel.
        func tunnelLine(_ number: Int, _ tls: [String]) async throws -> String {
            // A client that still speaks TLS 1.0 gets through: the proxy does not block what it does not intercept.
            let r = try await curl(
                ["-x", proxy.url, "--cacert", e2e.testCA, "--ciphers", "DEFAULT@SECLEVEL=0"] + tls
                    + ["https://tls10.test/bytes/10"], in: folder)
            #expect(r.status == 200, "\(r.stderr)")
            return try await proxy.process.waitForOutput { text in
                let prefix = "CONNECT https://tls10.test --- TUNNEL "
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                    .filter { $0.hasPrefix(prefix) }
                return lines.count >= number ? String(lines[number - 1]) : nil
            }
        }
        // Offered only TLS 1.0, the server's choice says nothing about what it would choose for iOS.
        let only10 = try await tunnelLine(1, ["--tlsv1.0", "--tls-max", "1.0"])
        #expect(only10.contains(" TUNNEL ATS n/a "), "\(only10)")
        #expect(only10.contains("; server chose TLSv1.0, "), "\(only10)")
        #expect(only10.contains("not judged: the client offered nothing newer"), "\(only10)")
        // Offered TLS 1.0 to 1.3, it still chose 1.0: it has nothing newer, and the app fails.
        let upTo13 = try await tunnelLine(2, ["--tlsv1.0"])
        #expect(upTo13.contains(" TUNNEL ATS VIOLATION -1200/-9836 "), "\(upTo13)")
        let notices = proxy.process.stderr
        #expect(notices.contains("the device's own check fails the app's request"), "\(notices)")
    }

    /// An Info.plist that pins `host` (to a key nobody has: only the tunnelling matters here).
    private func pinningPlist(for host: String, in folder: URL) throws -> URL {
        let pin = String(repeating: "A", count: 43) + "="
        let plist = folder.appendingPathComponent("pinning.plist")
        try """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>NSPinnedDomains</key><dict><key>\(host)</key><dict>
            <key>NSPinnedLeafIdentities</key><array><dict><key>SPKI-SHA256-BASE64</key><string>\(pin)</string>
            </dict></array></dict></dict></dict></plist>
            """.write(to: plist, atomically: true, encoding: .utf8)
        return plist
    }

    @Test("curl honours HTTPS_PROXY and goes through the proxy")
    func httpsProxyVariable() async throws {
        let stage = try await Stage()
        let r = try await ProxyEndToEndTests.curl(
            ["--cacert", stage.e2e.proxyCA, "https://\(Stage.httpsHost)/bytes/4096"],
            environment: ["HTTPS_PROXY": stage.proxy.url, "NO_PROXY": "", "no_proxy": ""], in: stage.folder)
        #expect(r.status == 200, "\(r.stderr)")
        #expect(try await stage.matchesAnnouncedChecksum(r))
    }

    @Test("Python's http.client tunnels with set_tunnel (CONNECT) and gets a leaf from the proxy's CA")
    func pythonTunnel() async throws {
        let stage = try await Stage()
        let r = try await stage.python(["tunnel", Stage.httpsHost, "/bytes/5000"])
        #expect(r["status"] as? Int == 200)
        #expect(r["ok"] as? Bool == true)
        #expect((r["peer"] as? String).map { $0 != "ATSProxy E2E Test CA" } == true, "\(r)")
    }

    @Test("A TLS client that closes without close_notify after its exchange is not reported as a TLS error")
    func closeWithoutCloseNotify() async throws {
        let stage = try await Stage()
        // Python's http.client closes its TLS socket without sending close_notify.
        let r = try await stage.python(["tunnel", Stage.httpsHost, "/bytes/100"])
        #expect(r["status"] as? Int == 200)
        let proxy = stage.proxy.process
        _ = try await proxy.waitForOutput { $0.contains("good.test/bytes/100") ? true : nil }
        let deadline = ContinuousClock.now + .seconds(1)
        while ContinuousClock.now < deadline, !proxy.stderr.contains("TLS error") {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(!proxy.stderr.contains("TLS error from the client"), "\(proxy.stderr)")
    }

    @Test("Keep-alive: several requests on one client connection, intercepted and plain")
    func keepAlive() async throws {
        let stage = try await Stage()
        let r = try await stage.python(["keepalive", Stage.httpsHost, Stage.plainHost, "5"])
        for kind in ["https", "plain"] {
            let k = r[kind] as? [String: Any]
            #expect(k?["good"] as? Int == 5, "\(kind): \(r)")
            #expect(k?["sockets"] as? Int == 1, "\(kind): one connection for all requests")
        }
    }

    @Test("HEAD (a Content-Length but no body) then GET on the same client connection", arguments: ["https", "http"])
    func headThenGet(scheme: String) async throws {
        let stage = try await Stage()
        let host = scheme == "https" ? Stage.httpsHost : Stage.plainHost
        let proxyArgs = ["-sS", "--max-time", "30", "-x", stage.proxy.url, "--cacert", stage.e2e.proxyCA]
        let r = try await runProcess(
            "/usr/bin/curl",
            proxyArgs + ["-I", "\(scheme)://\(host)/bytes/1000", "--next", "-o", "/dev/null", "-w", "%{http_code} %{num_connects}\n"]
                + proxyArgs + ["\(scheme)://\(host)/bytes/5"],
            in: stage.folder, timeout: .seconds(40))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("Content-Length: 1000"))
        // The GET reuses the connection (no new connect) and completes: the HEAD's length was not waited for.
        #expect(r.stdout.hasSuffix("200 0\n"), "\(r.stdout)")
    }

    @Test("Expect: 100-continue on a small upload: the client gets 100 then the origin's answer",
          arguments: ["https", "http"])
    func continueUpload(scheme: String) async throws {
        let stage = try await Stage()
        let host = scheme == "https" ? Stage.httpsHost : Stage.plainHost
        let r = try await stage.curl(
            ["-H", "Expect: 100-continue", "--data-binary", "hello", "\(scheme)://\(host)/upload"])
        #expect(r.headerText.contains("HTTP/1.1 100"), "\(r.headerText)")
        #expect(r.status == 200)
        // sha256("hello")
        #expect(r.bodyText == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824 5\n")
    }

    @Test("Upgrade: the 101 is relayed and bytes flow both ways afterwards", arguments: ["plain", "https"])
    func upgrade(mode: String) async throws {
        let stage = try await Stage()
        let host = mode == "https" ? Stage.httpsHost : Stage.plainHost
        let r = try await stage.python(["upgrade", host, mode], timeout: .seconds(40))
        #expect((r["status"] as? String)?.contains(" 101") == true, "\(r)")
        #expect(r["echoed"] as? Bool == true, "\(r)")
        // The 101 has its line at once; the upgraded connection gets one when it ends, with what crossed it.
        let scheme = mode == "https" ? "https" : "http"
        let end = try await stage.proxy.process.waitForLine(startingWith: "GET \(scheme)://\(host)/ws 101 UPGRADED ")
        #expect(end.contains(" 16.0 KiB "), "\(end)")
        #expect(end.contains("(upgraded connection ended: "), "\(end)")
    }
}

@Suite("The proxy refuses to loop into itself")
struct SelfLoopTests {
    @Test("Requests to the proxy's own address get 502 saying why, or the set-up page when they name the listener")
    func ownAddressRefused() async throws {
        // annotate: every request goes out, so nothing but the loop rule stands between it and the proxy itself.
        let stage = try await Stage(["--ats", "annotate"])
        let port = stage.proxy.port
        for url in ["https://127.0.0.1:\(port)/", "http://[::ffff:127.0.0.1]:\(port)/"] {
            let r = try await stage.curl(["--proxy-insecure", url])
            #expect(r.headerText.contains("502"), "\(url): \(r.headerText) \(r.stderr)")
        }
        // http://PROXY:PORT/ as the listener is named is the set-up page, answered without connecting anywhere.
        for url in ["http://127.0.0.1:\(port)/", "http://localhost:\(port)/"] {
            let r = try await stage.curl([url])
            #expect(r.status == 200, "\(url): \(r.headerText) \(r.stderr)")
            #expect(r.bodyText.contains("Certificate Trust Settings"), "\(url)")
        }
        let log = stage.proxy.process.stderr
        #expect(log.contains("own listening address"), "\(log)")
        let good = try await stage.curl(["https://\(Stage.httpsHost)/bytes/10"])
        #expect(good.status == 200, "\(good.stderr)")
    }
}

@Suite("--ats off still verifies upstream certificates")
struct AtsOffVerificationTests {
    @Test("A self-signed upstream for another name is not re-signed for the client, unless --insecure-upstream says so")
    func forgedUpstreamRefused() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let forged = try await Origin(e2e, tls: "selfsigned", in: folder)
        let proxy = try await Proxy(e2e, ["--ats", "off"] + forged.map("bank.test"), in: folder)
        let refused = try await curl(
            ["-x", proxy.url, "--cacert", e2e.proxyCA, "https://bank.test/bytes/10"], in: folder)
        #expect(refused.exit != 0, "the client must not see a valid chain: \(refused.headerText)")
        let line = try await proxy.process.waitForOutput(timeout: .seconds(10)) { text in
            text.split(separator: "\n").first { $0.contains("bank.test") }.map(String.init)
        }
        #expect(line.contains("FAILED -1202"), "\(line)")

        let insecure = try await Proxy(
            e2e, ["--ats", "off", "--insecure-upstream"] + forged.map("bank.test"), in: folder)
        let relayed = try await curl(
            ["-x", insecure.url, "--cacert", e2e.proxyCA, "https://bank.test/bytes/10"], in: folder)
        #expect(relayed.status == 200, "\(relayed.stderr)")
        let warned = try await insecure.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("--insecure-upstream: relaying an upstream the device would not trust") ? text : nil
        }
        #expect(warned.contains("upstream certificates are not verified"))
    }
}
