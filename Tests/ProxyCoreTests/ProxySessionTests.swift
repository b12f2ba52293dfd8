import ATSPolicy
import ProxyTrace
import TLSCore
import Testing

@testable import ProxyCore

@Suite("ProxySession, driven by events without sockets")
struct ProxySessionTests {
    @Test("--auth: a request without credentials is answered 407 with a Basic challenge and closed")
    func authRequired() throws {
        let env = try SessionHarness.environment(credentials: try ProxyCredentials(parsing: "qa:s3cret"))
        for request in ["CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n",
                        "GET http://good.test/ HTTP/1.1\r\nHost: good.test\r\n\r\n",
                        "GET http://good.test/ HTTP/1.1\r\nHost: good.test\r\nProxy-Authorization: Basic cWE6d3Jvbmc=\r\n\r\n"] {
            let out = SessionHarness.session(env).handle(.clientBytes(bytes(request)))
            #expect(out.clientText.hasPrefix("HTTP/1.1 407 "), "\(request)")
            #expect(out.clientText.contains("Proxy-Authenticate: Basic realm=\"atsproxy\""))
            #expect(out.connects.isEmpty)
            #expect(out.closesClient)
        }
    }

    @Test("--auth: every 407 is one console line and one JSON event saying missing or wrong, without the credentials")
    func authFailureLogged() throws {
        let env = try SessionHarness.environment(
            credentials: try ProxyCredentials(parsing: "qa:s3cret"), jsonEvents: true)
        let missing = SessionHarness.session(env)
        missing.clientAddress = "192.168.1.20:51234"
        let refused = missing.handle(.clientBytes(bytes(
            "CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        #expect(refused.notices.count == 1)
        #expect(refused.notices.first?.hasPrefix(
            "proxy authentication failed: 192.168.1.20:51234 sent no credentials (CONNECT good.test:443); answered 407")
            == true, "\(refused.notices)")
        #expect(refused.events.map(\.kind) == [.proxyAuthFailed])
        #expect(refused.events.first?.proxyAuth == ProxyAuthFailure(
            reason: .missing, method: "CONNECT", target: "good.test:443", client: "192.168.1.20:51234"))

        // "qa:n0pe": the user name is part of the credentials and is not logged either.
        let wrong = SessionHarness.session(env).handle(.clientBytes(bytes(
            "GET http://good.test/ HTTP/1.1\r\nHost: good.test\r\nProxy-Authorization: Basic cWE6bjBwZQ==\r\n\r\n")))
        #expect(wrong.notices == [
            "proxy authentication failed: a client sent wrong credentials (GET http://good.test/); answered 407"])
        #expect(wrong.events.first?.proxyAuth?.reason == .wrong)
        #expect(wrong.events.first?.message == wrong.notices.first)
        let logged = wrong.notices.joined() + (try wrong.events.map { try $0.jsonLine() }.joined())
        for secret in ["qa", "n0pe", "cWE6bjBwZQ"] { #expect(!logged.contains(secret), "\(logged)") }

        let accepted = SessionHarness.session(env).handle(.clientBytes(bytes(
            "CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n"
                + "Proxy-Authorization: Basic cWE6czNjcmV0\r\n\r\n")))
        #expect(accepted.notices.isEmpty && accepted.events.isEmpty)
    }

    @Test("--auth: each request on a keep-alive plain-HTTP connection needs the credentials, to any host")
    func authCheckedOnEveryRequest() throws {
        let env = try SessionHarness.environment(
            exceptionAllowingHTTP: "good.test", credentials: try ProxyCredentials(parsing: "qa:s3cret"))
        let session = SessionHarness.session(env)
        let good = "Proxy-Authorization: Basic cWE6czNjcmV0\r\n"
        let first = session.handle(.clientBytes(bytes("GET http://good.test/ HTTP/1.1\r\nHost: good.test\r\n\(good)\r\n")))
        #expect(first.connects.map(\.0) == ["good.test"])
        _ = session.handle(.upstreamConnected)
        _ = session.handle(.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")))
        for (request, reason) in [
            ("GET http://other.test/ HTTP/1.1\r\nHost: other.test\r\n\r\n", ProxyAuthFailure.Reason.missing),
            ("GET http://good.test/2 HTTP/1.1\r\nHost: good.test\r\nProxy-Authorization: Basic cWE6d3Jvbmc=\r\n\r\n",
             .wrong),
        ] {
            let out = session.handle(.clientBytes(bytes(request)))
            #expect(out.clientText.hasPrefix("HTTP/1.1 407 "), "\(out.clientText)")
            #expect(out.clientText.contains("Proxy-Authenticate: Basic realm=\"atsproxy\""))
            #expect(out.upstreamText.isEmpty, "forwarded: \(out.upstreamText)")
            #expect(out.connects.isEmpty)
            #expect(out.notices.first?.contains(reason == .missing ? "sent no credentials" : "sent wrong credentials")
                == true)
            #expect(!out.closesClient, "a 407 keeps the connection, so the client can retry with credentials")
        }
        // With the credentials again, the same connection forwards, and the upstream never sees them.
        let again = session.handle(.clientBytes(bytes("GET http://good.test/3 HTTP/1.1\r\nHost: good.test\r\n\(good)\r\n")))
        #expect(again.upstreamText.hasPrefix("GET /3 HTTP/1.1\r\n"), "\(again.upstreamText)")
        #expect(!again.upstreamText.contains("Proxy-Authorization"))
    }

    @Test("--auth: the password shows in no trace record, JSON event or console line, even at --diagnostics 3")
    func credentialsRedactedEverywhere() throws {
        let env = try SessionHarness.environment(
            exceptionAllowingHTTP: "good.test", credentials: try ProxyCredentials(parsing: "qa:s3cret"),
            diagnosticsLevel: 3, jsonEvents: true)
        let session = SessionHarness.session(env)
        let credentials = "Proxy-Authorization: Basic cWE6czNjcmV0\r\n"
        var out = session.handle(.clientBytes(bytes(
            "GET http://good.test/ HTTP/1.1\r\nHost: good.test\r\n\(credentials)\r\n")))
        out += session.handle(.upstreamConnected)
        out += session.handle(.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")))
        // Userinfo in a request-target is refused (400), and the line that says so does not repeat it.
        out += session.handle(.clientBytes(bytes(
            "GET http://qa:s3cret@good.test/ HTTP/1.1\r\nHost: good.test\r\n\(credentials)\r\n")))
        #expect(out.exchanges.map { "\($0.url) \($0.status ?? 0)" }
            == ["http://good.test/ 200", "http://[redacted]@good.test/ 400"])
        let enqueue = out.records.filter { $0.title == "Protocol Enqueue" }
        #expect(!enqueue.isEmpty)
        var printed = out.records.map(Self.text).joined(separator: "\n")
        printed += out.notices.joined(separator: "\n") + out.exchanges.map(\.url).joined()
        printed += try out.events.map { try $0.jsonLine() }.joined()
        for secret in ["s3cret", "cWE6czNjcmV0"] { #expect(!printed.contains(secret), "\(printed)") }
        #expect(printed.contains("http://[redacted]@good.test/"))
        #expect(!enqueue.map(Self.text).joined().contains("Proxy-Authorization"),
                "the header is not sent upstream, so it is not in Protocol Enqueue")
    }

    /// Everything a trace record prints: title, subject and every field.
    static func text(_ record: DiagnosticsRecord) -> String {
        ([record.title, record.subject] + record.fields.map { "\($0.key): \($0.value)" }).joined(separator: "\n")
    }

    @Test("--auth: a CONNECT with the right credentials is established")
    func authAccepted() throws {
        let env = try SessionHarness.environment(credentials: try ProxyCredentials(parsing: "qa:s3cret"))
        let out = SessionHarness.session(env).handle(.clientBytes(bytes(
            "CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\nProxy-Authorization: Basic cWE6czNjcmV0\r\n\r\n")))
        #expect(out.clientText == "HTTP/1.1 200 Connection established\r\n\r\n")
    }

    @Test("An origin-form request (the client does not know it talks to a proxy) is answered 400")
    func originForm() throws {
        let out = SessionHarness.session(try SessionHarness.environment())
            .handle(.clientBytes(bytes("GET /index.html HTTP/1.1\r\nHost: good.test\r\n\r\n")))
        #expect(out.clientText.hasPrefix("HTTP/1.1 400 "))
        #expect(out.clientText.contains("configure it as the HTTP and HTTPS proxy"))
        #expect(out.closesClient)
        #expect(out.exchanges.map { "\($0.method) \($0.url) \($0.status ?? 0)" } == ["GET /index.html 400"])
    }

    @Test("A first request the proxy refuses is logged as an exchange, named when its head parsed, '-' when not",
          arguments: [
              ("GET http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "- - 400"),
              ("GET http://a.test/ HTTP/3.0\r\nHost: a.test\r\n\r\n", "- - 505"),
              ("GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", "GET https://a.test/ 400"),
          ])
    func refusedFirstRequestIsLogged(request: String, line: String) throws {
        let out = SessionHarness.session(try SessionHarness.environment()).handle(.clientBytes(bytes(request)))
        #expect(out.closesClient)
        #expect(out.exchanges.map { "\($0.method) \($0.url) \($0.status ?? 0)" } == [line], "\(out.clientText)")
        #expect(out.exchanges.first?.requestBytes == request.utf8.count)
    }

    @Test("A client that opens TLS to the proxy itself (an https:// proxy setting) is told why and closed at once")
    func tlsToTheProxy() throws {
        let out = SessionHarness.session(try SessionHarness.environment())
            .handle(.clientBytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC]))
        #expect(out.closesClient)
        #expect(out.toClient.isEmpty)
        #expect(out.contains { if case .log(.notice(let text, _)) = $0 { text.contains("http:// proxy") } else { false } })
    }

    @Test("A request head still incomplete when its deadline passes is answered 408 and closed; a complete one is not")
    func requestHeadDeadline() throws {
        let env = try SessionHarness.environment()
        let slow = SessionHarness.session(env)
        let first = slow.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: goo")))
        #expect(first.contains(.startTimer(.requestHead, after: env.timeouts.client)))
        let late = slow.handle(.timerFired(.requestHead))
        #expect(late.clientText.hasPrefix("HTTP/1.1 408 "))
        #expect(late.closesClient)

        let prompt = SessionHarness.session(env)
        _ = prompt.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        let stale = prompt.handle(.timerFired(.requestHead))
        #expect(stale.isEmpty)
    }

    @Test("CONNECT is answered 200, then the session waits for the first bytes to sniff TLS; no upstream yet")
    func connectSniffs() throws {
        let session = SessionHarness.session(try SessionHarness.environment())
        let out = session.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        #expect(out.clientText == "HTTP/1.1 200 Connection established\r\n\r\n")
        #expect(out.connects.isEmpty)
        #expect(!out.closesClient)
        guard case .sniffing(let host, let port, let buffer) = session.phase else {
            Issue.record("expected sniffing, got \(session.phase)")
            return
        }
        #expect(host == "good.test" && port == 443 && buffer.isEmpty)
        // Bytes that are not TLS become a plain tunnel to the (mapped) upstream.
        let next = session.handle(.clientBytes(bytes("hello")))
        #expect(next.connects.first.map { $0 == ("good.test", 443) } == true)
    }

    @Test("CONNECT to port 0 is answered 400 naming the target, not 200: nothing can listen there")
    func connectToPortZeroIsRefused() throws {
        let session = SessionHarness.session(try SessionHarness.environment())
        let out = session.handle(.clientBytes(bytes("CONNECT good.test:0 HTTP/1.1\r\nHost: good.test:0\r\n\r\n")))
        #expect(out.clientText.hasPrefix("HTTP/1.1 400 "), "\(out.clientText)")
        #expect(
            out.clientText.hasSuffix("ATSProxy: CONNECT good.test:0: port 0 is not a valid port (1 to 65535)\n"),
            "\(out.clientText)")
        #expect(!out.clientText.contains("Connection established"))
        #expect(out.connects.isEmpty)
        #expect(out.closesClient)
        #expect(out.exchanges.map { "\($0.method) \($0.url) \($0.status ?? 0)" } == ["CONNECT good.test:0 400"])
    }

    @Test("A ClientHello arriving one byte at a time starts interception exactly once, when it is complete")
    func fragmentedClientHello() throws {
        let env = try SessionHarness.environment(mappings: [try HostMapping(parsing: "good.test=127.0.0.1:9443")])
        let session = SessionHarness.session(env)
        _ = session.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        let client = try TLSEngine(context: try TLSContext(.client()), serverName: "good.test")
        _ = client.handshake()
        let hello = client.takeOutput()
        #expect(hello.count > 100)
        var connects: [(String, Int)] = []
        for (index, byte) in hello.enumerated() {
            let out = session.handle(.clientBytes([byte]))
            #expect(!out.closesClient, "closed at byte \(index)")
            #expect(out.toClient.isEmpty, "nothing is answered before the upstream handshake")
            if !out.connects.isEmpty { #expect(index == hello.count - 1, "connected at byte \(index)") }
            connects += out.connects
        }
        #expect(connects.count == 1)
        #expect(connects.first.map { $0 == ("127.0.0.1", 9443) } == true)
    }

    @Test("A second upstream connection for one CONNECT is traced as attempt 2 with its reason, not as a repeat",
          arguments: [
            (70, "ATSProxy's probe, not the app's"), (120, "with no_application_protocol"),
          ] as [(UInt8, String)])
    func secondConnectionAttempt(alert: UInt8, reason: String) throws {
        let env = try SessionHarness.environment(
            mappings: [try HostMapping(parsing: "good.test=127.0.0.1:9443")], diagnosticsLevel: 1)
        let session = SessionHarness.session(env)
        _ = session.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        let client = try TLSEngine(context: try TLSContext(.client()), serverName: "good.test", alpn: ["http/1.1"])
        _ = client.handshake()
        var records = session.handle(.clientBytes(client.takeOutput())).records
        records += session.handle(.upstreamConnected).records
        // The origin answers the ClientHello with a fatal alert: 70 protocol_version (the proxy probes the server
        // to explain it) or 120 no_application_protocol (the proxy offers h2 and http/1.1 again).
        let refused = session.handle(.upstreamBytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, alert]))
        #expect(refused.connects.count == 1, "a second connection")
        records += refused.records
        records += session.handle(.upstreamConnected).records

        let tcp = records.filter { $0.title.hasPrefix("TCP Connection") }
        func field(_ record: DiagnosticsRecord, _ key: String) -> String? {
            record.fields.first { $0.key == key }?.value
        }
        #expect(tcp.map(\.title)
            == ["TCP Connection Start", "TCP Connection Connected", "TCP Connection Start", "TCP Connection Connected"])
        #expect(tcp.map { field($0, "Attempt") } == [nil, nil, "2", "2"])
        #expect(field(tcp[0], "Reason") == nil)
        // The record names where --map sent the host, as well as the host the app would connect to.
        #expect(field(tcp[0], "Host") == "good.test:443" && field(tcp[0], "Mapped To") == "127.0.0.1:9443")
        #expect(field(tcp[2], "Reason")?.contains(reason) == true, "\(tcp[2].fields)")
        #expect(tcp.allSatisfy { field($0, "Connection ID") == "1" && field($0, "Error") ?? "(null)" == "(null)" })
    }

    @Test("--map *.staging.test sends a subdomain to the mapped address; the upstream SNI stays the request's host")
    func wildcardMapping() throws {
        let env = try SessionHarness.environment(mappings: [try HostMapping(parsing: "*.staging.test=127.0.0.1:9443")])
        let session = SessionHarness.session(env)
        _ = session.handle(
            .clientBytes(bytes("CONNECT api.staging.test:443 HTTP/1.1\r\nHost: api.staging.test\r\n\r\n")))
        let client = try TLSEngine(context: try TLSContext(.client()), serverName: "api.staging.test")
        _ = client.handshake()
        let out = session.handle(.clientBytes(client.takeOutput()))
        #expect(out.connects.first.map { $0 == ("127.0.0.1", 9443) } == true)
        let upstreamHello = try ClientHelloParser.parse(session.handle(.upstreamConnected).toUpstream)
        #expect(upstreamHello?.serverName == "api.staging.test")
        // The apex is not covered by the wildcard: it connects to its own name.
        let apex = SessionHarness.session(env)
        _ = apex.handle(.clientBytes(bytes("CONNECT staging.test:443 HTTP/1.1\r\nHost: staging.test\r\n\r\n")))
        #expect(apex.handle(.clientBytes(bytes("hello"))).connects.first.map { $0 == ("staging.test", 443) } == true)
    }

    /// A session for a client that sent `CONNECT pass.test:443` (passed through, mapped to `mappedTo`) and then
    /// `after`; returns it with its commands for those bytes.
    private func passthroughSession(mappedTo: String = "127.0.0.1:9443", after: [UInt8] = []) throws
        -> (ProxySession, [ProxyCommand])
    {
        let env = try SessionHarness.environment(
            mappings: [try HostMapping(parsing: "pass.test=\(mappedTo)")], passthrough: [".pass.test"])
        let session = SessionHarness.session(env)
        let connect = bytes("CONNECT pass.test:443 HTTP/1.1\r\nHost: pass.test:443\r\n\r\n") + after
        return (session, session.handle(.clientBytes(connect)))
    }

    @Test("A --passthrough host is tunnelled raw: connect, then 200 and the tunnel starts with the buffered bytes")
    func passthrough() throws {
        let (session, out) = try passthroughSession(after: [0x16, 0x03, 0x01])
        #expect(out.clientText.isEmpty, "the 200 waits for the upstream")
        #expect(out.connects.first.map { $0 == ("127.0.0.1", 9443) } == true)
        let connected = session.handle(.upstreamConnected)
        #expect(connected == [
            .sendToClient(Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)),
            .sendToUpstream([0x16, 0x03, 0x01]), .startTunnel,
        ])
        // The tunnel's first bytes are watched until the server's answer to the hello is read: here, a refusal.
        #expect(session.watchesTunnel)
        _ = session.handle(.tunnelBytes(fromClient: false, [0x15, 0x03, 0x03, 0x00]))
        #expect(session.watchesTunnel, "an alert record is not whole yet")
        _ = session.handle(.tunnelBytes(fromClient: false, [0x02, 0x02, 0x46]))
        #expect(!session.watchesTunnel)
        // The record counts the bytes the session forwarded itself as well as the relay's.
        let closed = session.handle(.tunnelClosed(fromClient: 100, toClient: 200))
        let summaries = closed.exchanges
        #expect(summaries.map(\.requestBytes) == [103])
        #expect(summaries.map(\.responseBytes) == [200])
        #expect(summaries.first?.outcome == .notEvaluated)
        let note = summaries.first?.note ?? ""
        // Only three bytes of the client's hello came through the session, so it was never read.
        #expect(note.hasSuffix("; not judged: the server sent the alert protocol_version (70) before any ClientHello "
            + "was read"), "\(note)")
    }

    @Test("A client sending while its tunnel's upstream connects pauses past 64 KiB; all goes up, then reads resume")
    func tunnelPendingBytesAreBounded() throws {
        let (session, _) = try passthroughSession()
        let piece = [UInt8](repeating: 0x61, count: 16 * 1024)
        var paused = 0
        for _ in 0..<6 { paused += session.handle(.clientBytes(piece)).filter { $0 == .pauseReading(.client) }.count }
        #expect(paused == 1, "one pause, when the held bytes reach the limit")
        let connected = session.handle(.upstreamConnected)
        #expect(connected.toUpstream.count == 6 * piece.count)
        // Compared by position: a failure printing the commands would print the 96 KiB with them.
        let resumed = connected.firstIndex(of: .resumeReading(.client))
        #expect(resumed != nil && resumed == connected.firstIndex(of: .startTunnel).map { $0 - 1 })
    }

    /// A passthrough tunnel to pass.test whose client sent a real ClientHello offering up to `maximum`, answered by a
    /// ServerHello choosing `version` and `suite`; returns the tunnel's record.
    private func judgedTunnel(maximum: TLSVersion, version: UInt16, suite: UInt16) throws -> ExchangeSummary? {
        let (session, _) = try passthroughSession()
        _ = session.handle(.upstreamConnected)
        var configuration = TLSConfiguration.client()
        configuration.maximumVersion = maximum
        let client = try TLSEngine(context: try TLSContext(configuration), serverName: "pass.test")
        _ = client.handshake()
        _ = session.handle(.tunnelBytes(fromClient: true, client.takeOutput()))
        // legacy_version, random, empty session_id, suite, null compression, no extensions.
        let body = [UInt8(version >> 8), UInt8(version & 0xFF)] + [UInt8](repeating: 7, count: 32) + [0]
            + [UInt8(suite >> 8), UInt8(suite & 0xFF), 0]
        let message = [0x02, 0, 0, UInt8(body.count)] + body
        _ = session.handle(.tunnelBytes(fromClient: false, [0x16, 0x03, 0x03, 0, UInt8(message.count)] + message))
        #expect(!session.watchesTunnel)
        let closed = session.handle(.tunnelClosed(fromClient: 0, toClient: 0))
        return closed.exchanges.first
    }

    @Test("A tunnel's ServerHello is judged only where it tells what the app would get")
    func tunnelJudgedFromTheHellos() throws {
        // Offered up to TLS 1.3, the server chose TLS 1.0: it has nothing newer, and the app fails.
        let old = try judgedTunnel(maximum: .tls13, version: 0x0301, suite: 0xC013)
        #expect(old?.outcome == .violation)
        #expect(old?.errors.map(\.shortCode) == ["-1200/-9836"])
        #expect(old?.note?.contains("; server chose TLSv1.0, TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: its newest version is "
            + "TLSv1.0 (the client offered newer); ") == true, "\(old?.note ?? "")")
        // Offered only up to TLS 1.0, the server's choice says nothing about what iOS would get.
        let only10 = try judgedTunnel(maximum: .tls10, version: 0x0301, suite: 0xC013)
        #expect(only10?.outcome == .notEvaluated)
        #expect(only10?.note?.contains("not judged: the client offered nothing newer") == true)
        // TLS 1.2 with a suite iOS never offers (static RSA): the server may choose another for the app.
        let rsa = try judgedTunnel(maximum: .tls13, version: 0x0303, suite: 0x009C)
        #expect(rsa?.outcome == .notEvaluated)
        #expect(rsa?.note?.contains("not judged: iOS does not offer that suite") == true)
        // TLS 1.2 with ECDHE and AES-GCM: what ATS accepts.
        let good = try judgedTunnel(maximum: .tls13, version: 0x0303, suite: 0xC02F)
        #expect(good?.outcome == .allowed)
        #expect(good?.note?.hasSuffix("; server chose TLSv1.2, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, "
            + "certificate not judged") == true, "\(good?.note ?? "")")
    }

    @Test("A passthrough host that cannot be reached is answered 502 with the mapping, and logged as FAILED -1004")
    func tunnelUnreachable() throws {
        let (session, _) = try passthroughSession(mappedTo: "127.0.0.1:9")
        let failed = session.handle(.upstreamConnectFailed(error: "connection refused", failure: .cannotConnect))
        #expect(failed.clientText.hasPrefix("HTTP/1.1 502 "), "\(failed.clientText)")
        #expect(failed.clientText.contains("cannot connect to pass.test:443 (mapped to 127.0.0.1:9)"))
        #expect(failed.closesClient)
        let summary = failed.exchanges.first
        #expect(summary?.outcome == .failed)
        #expect(summary?.status == 502)
        #expect(summary?.errors.map(\.shortCode) == ["-1004"])
        #expect(summary?.note?.hasSuffix("; could not connect (mapped to 127.0.0.1:9): connection refused") == true)
    }

    /// It was logged with the request's verdict (`ATS ok`), as if the server had answered 502 itself.
    @Test("A plain-HTTP server that cannot be reached is answered 502 and logged FAILED with the app's error")
    func plainUnreachable() throws {
        let env = try SessionHarness.environment(exceptionAllowingHTTP: "gone.test")
        let session = SessionHarness.session(env)
        let sent = session.handle(.clientBytes(bytes("GET http://gone.test/ HTTP/1.1\r\nHost: gone.test\r\n\r\n")))
        #expect(sent.connects.map(\.0) == ["gone.test"])
        let failed = session.handle(.upstreamConnectFailed(error: "no address for gone.test", failure: .cannotFindHost))
        #expect(failed.clientText.hasPrefix("HTTP/1.1 502 "), "\(failed.clientText)")
        let line = try #require(failed.exchanges.first)
        #expect(line.outcome == .failed)
        #expect(line.consoleLine(colour: false).contains("502 HTTP/1.1 FAILED -1003"), "\(line.consoleLine(colour: false))")
    }

    @Test("An unreachable server and a client that does not trust the proxy's CA: the notice says to install it")
    func untrustedCAWithUnreachableServer() throws {
        let env = try SessionHarness.environment(mappings: [try HostMapping(parsing: "gone.test=127.0.0.1:9")])
        let session = SessionHarness.session(env)
        _ = session.handle(.clientBytes(bytes("CONNECT gone.test:443 HTTP/1.1\r\nHost: gone.test:443\r\n\r\n")))
        var configuration = TLSConfiguration.client()
        configuration.verifyPeer = true  // and trusts nothing: not the proxy's CA
        let client = try TLSEngine(context: try TLSContext(configuration), serverName: "gone.test")
        _ = client.handshake()
        _ = session.handle(.clientBytes(client.takeOutput()))
        // The upstream is unreachable: the client's handshake goes ahead with a good leaf, to carry the 502.
        let refused = session.handle(.upstreamConnectFailed(error: "connection refused", failure: .cannotConnect))
        client.feed(refused.toClient)
        guard case .failed(.localFailure(alertSent: .unknownCA?, _)) = client.handshake() else {
            Issue.record("the client accepted a leaf from a CA it does not trust")
            return
        }
        let notices = session.handle(.clientBytes(client.takeOutput())).notices
        #expect(notices.contains { $0.contains("the client does not trust ATSProxy's CA") }, "\(notices)")
        #expect(!notices.contains { $0.contains("deliberately flawed") }, "\(notices)")
    }

    @Test("A tunnel whose server does not answer with TLS says so on its record, and stops being watched")
    func tunnelServerNotTLS() throws {
        let (session, _) = try passthroughSession()
        _ = session.handle(.upstreamConnected)
        _ = session.handle(.tunnelBytes(fromClient: false, bytes("SSH-2.0-OpenSSH_9.2\r\n")))
        #expect(!session.watchesTunnel)
        let closed = session.handle(.tunnelClosed(fromClient: 10, toClient: 21))
        let note = closed.compactMap { if case .log(.exchange(let s)) = $0 { s.note } else { nil } }.first ?? nil
        #expect(note?.contains("; not judged: the server's first bytes are not a TLS handshake (") == true,
                "\(note ?? "")")
    }

    @Test("Plain forwarding rewrites absolute-form to origin-form and strips Proxy-* headers")
    func plainForwarding() throws {
        let env = try SessionHarness.environment(
            exceptionAllowingHTTP: "media.test", mappings: [try HostMapping(parsing: "media.test=127.0.0.1:8081")])
        let session = SessionHarness.session(env)
        let request = "GET http://media.test/a/b?c=1 HTTP/1.1\r\nHost: media.test\r\nProxy-Connection: keep-alive\r\n"
            + "Proxy-Authorization: Basic eDp5\r\nAccept: */*\r\n\r\n"
        let first = session.handle(.clientBytes(bytes(request)))
        #expect(first.connects.first.map { $0 == ("127.0.0.1", 8081) } == true)
        #expect(first.toUpstream.isEmpty, "nothing goes out before the upstream is connected")
        let sent = session.handle(.upstreamConnected).upstreamText
        #expect(sent.hasPrefix("GET /a/b?c=1 HTTP/1.1\r\n"))
        #expect(sent.contains("Host: media.test\r\n"))
        #expect(sent.contains("Accept: */*\r\n"))
        #expect(!sent.lowercased().contains("proxy-"))
        let response = session.handle(.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")))
        #expect(response.clientText == "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        #expect(!response.closesClient)
    }

    @Test("Plain forwarding sends the Host of the target URI, not the client's Host field (RFC 9112 §3.2.2)")
    func hostFromTarget() throws {
        let env = try SessionHarness.environment(exceptionAllowingHTTP: "media.test")
        let session = SessionHarness.session(env)
        _ = session.handle(.clientBytes(bytes("GET http://media.test:8080/x HTTP/1.1\r\nHost: other.test\r\n\r\n")))
        let sent = session.handle(.upstreamConnected).upstreamText
        #expect(sent.contains("Host: media.test:8080\r\n"), "\(sent)")
        #expect(!sent.contains("other.test"))
    }

    @Test("http:// to a host that needs TLS is answered 403 -1022 without connecting")
    func cleartextBlocked() throws {
        let session = SessionHarness.session(try SessionHarness.environment())
        let out = session.handle(.clientBytes(bytes("GET http://plain.test/ HTTP/1.1\r\nHost: plain.test\r\n\r\n")))
        #expect(out.connects.isEmpty)
        #expect(out.clientText.hasPrefix("HTTP/1.1 403 Forbidden\r\n"))
        #expect(out.clientText.contains("X-ATS-Error: -1022 NSURLErrorAppTransportSecurityRequiresSecureConnection\r\n"))
        #expect(!out.clientText.contains("X-ATS-SSL-Error"))
        #expect(!out.closesClient, "a keep-alive client may send its next request")
    }

    @Test("--ats annotate forwards the cleartext request and annotates the response with -1022")
    func cleartextAnnotated() throws {
        let session = SessionHarness.session(try SessionHarness.environment(mode: .annotate))
        let out = session.handle(.clientBytes(bytes("GET http://plain.test/ HTTP/1.1\r\nHost: plain.test\r\n\r\n")))
        #expect(out.connects.first.map { $0 == ("plain.test", 80) } == true)
        _ = session.handle(.upstreamConnected)
        let response = session.handle(.upstreamBytes(bytes("HTTP/1.1 204 No Content\r\n\r\n")))
        #expect(response.clientText.hasPrefix("HTTP/1.1 204 No Content\r\n"))
        #expect(response.clientText.contains("X-ATS-Verdict: violation\r\n"))
        #expect(response.clientText.contains("X-ATS-Error: -1022 "))
    }
}
