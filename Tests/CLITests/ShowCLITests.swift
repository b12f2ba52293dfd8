import ATSPolicy
import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace
import Testing
import TestSupport

/// `atsproxy show` and `atsproxy har` run as a user would: the built binary on a capture file written by the store.
@Suite struct ShowCLITests {
    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    static func atsproxy(_ args: [String]) throws -> Run {
        let r = try runATSProxy(args, limit: 60)
        return Run(status: r.status, stdout: String(decoding: r.stdout, as: UTF8.self), stderr: r.stderr)
    }

    /// A capture with four exchanges: an allowed GET with a text body, a blocked TLS 1.0 handshake with its fix,
    /// a 404 whose body was cut, and a binary body; plus the first connection's trace.
    static func capture() throws -> (folder: URL, path: String) {
        let folder = try TestScratch.folder("show")
        let path = folder.appendingPathComponent("session.atscap").path
        let writer = try CaptureWriter.open(
            path: path, run: CaptureRunInfo(started: 1_795_000_000, atsproxyVersion: "test", bodyLimit: 16, settings: [:]))
        func exchange(
            _ connection: UInt64, _ method: String, _ url: String, _ status: Int?, _ version: String,
            _ outcome: ExchangeSummary.ATSOutcome, errors: [ExchangeError] = [], body: CapturedBody? = nil,
            contentType: String = "text/plain", violations: [ATSViolation] = []
        ) -> CaptureItem {
            var e = ExchangeSummary(
                method: method, url: url, status: status, httpVersion: version, outcome: outcome, errors: errors,
                requestBytes: 0, responseBytes: body?.totalBytes ?? 0, durationMilliseconds: 3)
            e.connection = ConnectionRecord(
                connectionID: connection, clientAddress: "127.0.0.1:5000" + String(connection), upstreamAddress: "192.0.2.1:443",
                clientTLS: TLSLegFacts(
                    version: "TLSv1.3", cipherSuite: "TLS_AES_128_GCM_SHA256", alpn: "http/1.1",
                    serverName: "api.example.com", resumed: false),
                decision: PolicyDecision(keyPath: [], reason: "no exception entry matches"), violations: violations)
            e.action = outcome == .blocked ? .blockedHandshake : .relayed
            let target = url.split(separator: "/", maxSplits: 3).dropFirst(2).last.map { "/" + $0 } ?? "/"
            e.detail = ExchangeDetail(
                request: status == nil
                    ? nil : HTTPRequestHead(method: method, target: target, headers: [("Host", "api.example.com")]),
                response: status.map {
                    HTTPResponseHead(status: $0, reason: $0 == 200 ? "OK" : "Not Found", headers: [("Content-Type", contentType)])
                },
                timings: ExchangeTimings(started: 1_795_000_000 + Double(connection), ended: 1_795_000_000.003 + Double(connection)),
                responseBody: body)
            return .exchange(e)
        }
        let tls10 = ExchangeError(urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836))
        var trace = DiagnosticsRecord(
            title: "TCP Connection Start", subject: "(null)", fields: [.init("Connection ID", "1"), .init("Host", "api.example.com:443")])
        trace.connectionID = 1
        try writer.write([
            trace,
        ].map { CaptureItem.trace($0, time: 1_795_000_001) } + [
            exchange(1, "GET", "https://api.example.com/hello", 200, "HTTP/1.1", .allowed,
                     body: CapturedBody(bytes: Array("hello, world".utf8), totalBytes: 12)),
            exchange(2, "CONNECT", "https://old.example.com", nil, "TLS", .blocked, errors: [tls10], violations: [
                ATSViolation(
                    kind: .tlsVersionTooLow, urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836),
                    explanation: "the server negotiated TLS 1.0",
                    fix: .setKeys(domain: "old.example.com", keys: [FixKey(key: "NSExceptionMinimumTLSVersion", value: .string("TLSv1.0"))])),
            ]),
            exchange(3, "POST", "https://api.example.com/missing", 404, "HTTP/2.0", .allowed,
                     body: CapturedBody(bytes: Array("not found, sorry".utf8), totalBytes: 900)),
            exchange(4, "GET", "https://api.example.com/logo.png", 200, "HTTP/1.1", .allowed,
                     body: CapturedBody(bytes: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 1], totalBytes: 10),
                     contentType: "image/png"),
        ])
        try writer.close(ended: 1_795_000_100)
        return (folder, path)
    }

    @Test("show lists exchanges newest first, each with its id and time before the console line")
    func listing() throws {
        let (_, path) = try Self.capture()
        let run = try Self.atsproxy(["show", path])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 4, "\(run.stdout)")
        #expect(lines[0].hasPrefix("     4  11:06:44.000  GET https://api.example.com/logo.png 200 HTTP/1.1 ATS ok 10 B"))
        #expect(lines[2] == "     2  11:06:42.000  CONNECT https://old.example.com --- TLS ATS BLOCKED -1200/-9836 0 B 3.0 ms")
        #expect(!run.stdout.contains("\u{1B}["), "no colour when stdout is not a terminal")
        let limited = try Self.atsproxy(["show", path, "--limit", "1"])
        #expect(limited.stdout.split(separator: "\n").count == 1)
    }

    @Test("show --filter selects with the filter language; --json gives one object per line")
    func filtering() throws {
        let (_, path) = try Self.capture()
        func ids(_ filter: String) throws -> [String] {
            let run = try Self.atsproxy(["show", path, "--filter", filter])
            #expect(run.status == 0, "\(filter): \(run.stderr)")
            return run.stdout.split(separator: "\n").map { String($0.split(separator: " ").first ?? "") }
        }
        #expect(try ids("problems") == ["3", "2"])
        #expect(try ids("verdict:blocked") == ["2"])
        #expect(try ids("host:api.example.com -status:4xx") == ["4", "1"])
        #expect(try ids("method:POST or text:logo") == ["4", "3"])
        #expect(try ids("code:-9836") == ["2"])
        let json = try Self.atsproxy(["show", path, "--json", "--filter", "status:404"])
        let objects = try json.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.count == 1)
        #expect(objects.first?["id"] as? Int == 3)
        #expect((objects.first?["exchange"] as? [String: Any])?["status"] as? Int == 404)
    }

    @Test("show ID prints one exchange in full: heads, body previews (text, hex, cut), TLS, decision and fix, trace")
    func oneExchange() throws {
        let (_, path) = try Self.capture()
        let hello = try Self.atsproxy(["show", path, "1"])
        #expect(hello.status == 0, "\(hello.stderr)")
        for part in [
            "Exchange 1 (run 1, connection 1)", "GET https://api.example.com/hello 200 HTTP/1.1 ATS ok",
            "Client: 127.0.0.1:50001; upstream: 192.0.2.1:443", "Request, as the client sent it", "  GET /hello HTTP/1.1",
            "Response body: 12 bytes", "  hello, world", "Client ⇄ proxy: TLSv1.3, TLS_AES_128_GCM_SHA256",
            "Verdict: allowed", "Decided by: ATS defaults (no key applies)", "TCP Connection Start: (null)",
            "Host: api.example.com:443",
        ] {
            #expect(hello.stdout.contains(part), "no \(part) in:\n\(hello.stdout)")
        }
        let blocked = try Self.atsproxy(["show", path, "--id", "2"])
        for part in [
            "Verdict: BLOCKED", "The app would get: -1200 NSURLErrorSecureConnectionFailed",
            "Violation (tlsVersionTooLow): the server negotiated TLS 1.0",
            "Fix: set in NSExceptionDomains › old.example.com: NSExceptionMinimumTLSVersion = TLSv1.0",
            "<key>NSExceptionMinimumTLSVersion</key>",
        ] {
            #expect(blocked.stdout.contains(part), "no \(part) in:\n\(blocked.stdout)")
        }
        let cut = try Self.atsproxy(["show", path, "3"])
        #expect(cut.stdout.contains("Response body: 900 bytes (CUT: the capture kept the first 16)"), "\(cut.stdout)")
        let binary = try Self.atsproxy(["show", path, "4"])
        #expect(binary.stdout.contains("00000000  89 50 4e 47 0d 0a 1a 0a  00 01"), "\(binary.stdout)")
        #expect(binary.stdout.contains("|.PNG......|"), "\(binary.stdout)")
        let entry = try Self.atsproxy(["show", path, "2", "--json"])
        let har = try #require(try JSONSerialization.jsonObject(with: Data(entry.stdout.utf8)) as? [String: Any])
        #expect((har["_ats"] as? [String: Any])?["verdict"] as? String == "blocked")
    }

    @Test("Bad input: a filter that does not parse, a missing file, a file that is not a capture (2); no such id (1)")
    func errors() throws {
        let (folder, path) = try Self.capture()
        let filter = try Self.atsproxy(["show", path, "--filter", "host:a.test stauts:404"])
        #expect(filter.status == 2)
        #expect(filter.stderr.contains("filter, column 13: unknown key \"stauts\""), "\(filter.stderr)")
        #expect(filter.stderr.contains("\n  host:a.test stauts:404\n              ^"), "\(filter.stderr)")
        #expect(filter.stdout.isEmpty)
        let missing = try Self.atsproxy(["show", folder.appendingPathComponent("nope.atscap").path])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("nope.atscap: no such file"), "\(missing.stderr)")
        let text = folder.appendingPathComponent("notes.txt")
        try Data("not a capture".utf8).write(to: text)
        let notCapture = try Self.atsproxy(["har", text.path])
        #expect(notCapture.status == 2)
        #expect(notCapture.stderr.contains("not an ATSProxy capture"), "\(notCapture.stderr)")
        let noID = try Self.atsproxy(["show", path, "99"])
        #expect(noID.status == 1)
        #expect(noID.stderr.contains("no exchange 99 (4 exchanges in the file)"), "\(noID.stderr)")
        let both = try Self.atsproxy(["show", path, "1", "--filter", "problems"])
        #expect(both.status == 64, "a usage error: \(both.stderr)")
    }

    @Test("har writes HAR 1.2 to stdout or, whole or not at all, to -o FILE")
    func har() throws {
        let (folder, path) = try Self.capture()
        let stdout = try Self.atsproxy(["har", path, "--filter", "problems"])
        #expect(stdout.status == 0, "\(stdout.stderr)")
        let doc = try #require(try JSONSerialization.jsonObject(with: Data(stdout.stdout.utf8)) as? [String: Any])
        let log = try #require(doc["log"] as? [String: Any])
        #expect(log["version"] as? String == "1.2")
        #expect((log["entries"] as? [[String: Any]])?.compactMap { ($0["_atsproxy"] as? [String: Any])?["id"] as? Int } == [2, 3],
                "oldest first")
        let out = folder.appendingPathComponent("session.har").path
        let file = try Self.atsproxy(["har", path, "-o", out])
        #expect(file.status == 0, "\(file.stderr)")
        #expect(file.stderr.contains("4 entries written to \(out)"))
        #expect(FileManager.default.fileExists(atPath: out))
        let nowhere = folder.appendingPathComponent("missing-dir/x.har").path
        let failed = try Self.atsproxy(["har", path, "-o", nowhere])
        #expect(failed.status == 2)
        #expect(failed.stderr.contains("missing-dir/x.har: cannot create the file"), "\(failed.stderr)")
        let left = try FileManager.default.contentsOfDirectory(atPath: folder.path)
        #expect(!left.contains { $0.contains("partial") }, "\(left)")
    }
}
