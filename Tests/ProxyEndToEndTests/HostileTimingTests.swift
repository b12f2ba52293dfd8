import Foundation
import Testing

/// Misbehaving upstreams and clients against a real proxy on 127.0.0.1, with short deadlines.
@Suite("Hostile upstreams and slow clients: unasked responses, stalls, silent servers")
struct HostileTimingTests {
    static let plainHost = "media-server.example.com"
    static let httpsHost = "good.test"

    /// A proxy mapping the plain host (allowed over http:// by config/media-server.plist) and good.test to origins.
    private func proxy(
        _ e2e: E2E, plainPort: Int, httpsPort: Int? = nil, _ extra: [String] = [], in folder: URL
    ) async throws -> Proxy {
        let plist = e2e.packageRoot.appendingPathComponent("config/media-server.plist").path
        var args = ["--plist", plist, "--map", "\(Self.plainHost)=127.0.0.1:\(plainPort)"]
        if let httpsPort { args += ["--map", "\(Self.httpsHost)=127.0.0.1:\(httpsPort)"] }
        return try await Proxy(e2e, args + extra, in: folder)
    }

    @Test("A second, unasked response is never served as the answer to the next request (http:// and intercepted)",
          arguments: ["http", "https"])
    func unaskedResponse(scheme: String) async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let plain = try await hostileOrigin(e2e, mode: "unasked", in: folder)
        let tls = try await hostileOrigin(e2e, mode: "unasked", tls: "good", in: folder)
        let proxy = try await proxy(e2e, plainPort: try await port(of: plain), httpsPort: try await port(of: tls), in: folder)
        let host = scheme == "https" ? Self.httpsHost : Self.plainHost
        // Two requests curl sends on one connection when it can.
        let r = try await runProcess(
            "/usr/bin/curl",
            ["-sS", "--max-time", "20", "-x", proxy.url, "--cacert", e2e.proxyCA, "\(scheme)://\(host)/1",
             "\(scheme)://\(host)/2"],
            in: folder, timeout: .seconds(30))
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout == "conn 1 req 1conn 2 req 1", "\(r.stdout)")
        let notice = try await proxy.process.waitForOutput(stderr: true) { text in
            text.contains("no request outstanding") ? text : nil
        }
        #expect(notice.contains(scheme == "https" ? "good.test:443" : "127.0.0.1:"))
    }

    @Test("A 101 the request did not ask for is answered 502 and logged, not relayed as a raw pipe")
    func unaskedSwitchingProtocols() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await hostileOrigin(e2e, mode: "upgrade", in: folder)
        let proxy = try await proxy(e2e, plainPort: try await port(of: origin), in: folder)
        let r = try await curl(["-x", proxy.url, "http://\(Self.plainHost)/x"], in: folder)
        #expect(r.status == 502, "\(r.headerText) \(r.stderr)")
        #expect(!r.bodyText.contains("RAW BYTES"))
        let line = try await proxy.process.waitForOutput { text in
            text.split(separator: "\n").first { $0.contains("/x 502 ") }.map(String.init)
        }
        #expect(line.contains("GET http://\(Self.plainHost)/x 502"))
    }

    @Test("An upstream that never answers gets the client 504 with -1001 after --response-timeout, logged FAILED -1001",
          arguments: ["http", "https"])
    func silentUpstream(scheme: String) async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let plain = try await hostileOrigin(e2e, mode: "silent", in: folder)
        let tls = try await hostileOrigin(e2e, mode: "silent", tls: "good", in: folder)
        let proxy = try await proxy(
            e2e, plainPort: try await port(of: plain), httpsPort: try await port(of: tls),
            ["--response-timeout", "1"], in: folder)
        let host = scheme == "https" ? Self.httpsHost : Self.plainHost
        let started = ContinuousClock.now
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "\(scheme)://\(host)/slow"], in: folder)
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(r.status == 504, "\(r.headerText) \(r.stderr)")
        #expect(r.header("X-ATS-Error") == "-1001 NSURLErrorTimedOut")
        #expect(r.header("X-ATS-Verdict") == "unreachable")
        let line = try await proxy.process.waitForOutput { text in
            text.split(separator: "\n").first { $0.contains("/slow 504 ") }.map(String.init)
        }
        #expect(line.contains("FAILED -1001"), "\(line)")
    }

    @Test("Slow clients: a later head, a dripping body, a missing ClientHello, a stalled TLS handshake",
          arguments: [
            ("head", "408", "request head"), ("body", "408", "request body"), ("hello", "", "no TLS ClientHello"),
            ("handshake", "", "TLS handshake did not finish"),
          ])
    func slowClient(mode: String, status: String, notice: String) async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let plain = try await Origin(e2e, in: folder)
        let tls = try await Origin(e2e, tls: "good", in: folder)
        let proxy = try await proxy(
            e2e, plainPort: plain.port, httpsPort: tls.port, ["--client-timeout", "1"], in: folder)
        let host = mode == "head" || mode == "body" ? Self.plainHost : Self.httpsHost
        let result = try await ProxyEndToEndTests.slowClient(proxy, mode: mode, host: host, in: folder)
        #expect(result["closed"] as? Bool == true, "\(result)")
        #expect((result["seconds"] as? Double ?? 99) < 10, "\(result)")
        let text = result["text"] as? String ?? ""
        if !status.isEmpty { #expect(text.hasPrefix("HTTP/1.1 \(status) "), "\(text)") }
        let said = try await proxy.process.waitForOutput(stderr: true) { $0.contains(notice) ? $0 : nil }
        #expect(said.contains("--client-timeout"))
    }
}
