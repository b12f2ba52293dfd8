import Foundation
import Testing

@Suite("Diagnostics traces and JSON events")
struct TraceTests {
    /// Runs one good HTTPS exchange and one TLS 1.0 block through a proxy started with `arguments`/`environment`,
    /// then returns its stderr.
    private func traceOfGoodAndBlocked(_ arguments: [String], environment: [String: String] = [:]) async throws
        -> (stderr: String, stage: Stage)
    {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let old = try await Origin(e2e, tls: "tls10", tls10: true, in: folder)
        let stage = try await Stage(old.map("tls10.test") + arguments, environment: environment)
        let good = try await stage.curl(["https://\(Stage.httpsHost)/bytes/1024"])
        #expect(good.status == 200)
        let bad = try await stage.curl(["https://tls10.test/"])
        #expect(bad.exit == 35)
        // The records are written as the exchanges end; give the writer a moment to reach them all.
        let stderr = try await stage.proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("_kCFStreamErrorCodeKey=-9836") && text.contains("Did Finish") ? text : nil
        }
        return (stderr, stage)
    }

    static let records = [
        "TCP Connection Start", "TLS Handshake", "ATS Decision", "Protocol Enqueue", "Protocol Received",
        "Did Finish", "Response Error",
    ]

    private func expectRecords(_ stderr: String, level: Int) throws {
        let envelope = try Regex("CFNetwork Diagnostics \\[\(level):[0-9]+\\] [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} \\{")
        #expect(stderr.contains(envelope))
        for title in Self.records {
            #expect(stderr.contains("\t") && stderr.contains(title + ":"), "missing record \(title)")
        }
        #expect(stderr.contains("HTTP/1.1 200"))
        #expect(stderr.contains("_kCFStreamErrorCodeKey=-9836"))
    }

    @Test("--diagnostics 1 writes CFNetwork envelopes for the exchange and the block")
    func level1() async throws {
        let (stderr, _) = try await traceOfGoodAndBlocked(["--diagnostics", "1"])
        try expectRecords(stderr, level: 1)
    }

    @Test("CFNETWORK_DIAGNOSTICS=1 in the environment works like --diagnostics 1")
    func environmentVariable() async throws {
        let (stderr, _) = try await traceOfGoodAndBlocked([], environment: ["CFNETWORK_DIAGNOSTICS": "1"])
        try expectRecords(stderr, level: 1)
    }

    @Test("--diagnostics 3 tags records with level 3")
    func level3() async throws {
        let (stderr, _) = try await traceOfGoodAndBlocked(["--diagnostics", "3"])
        try expectRecords(stderr, level: 3)
    }

    @Test("--log-json writes one parseable JSON object per line, with decisions and exchanges")
    func jsonLog() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let log = folder.appendingPathComponent("events.jsonl")
        let old = try await Origin(e2e, tls: "tls10", tls10: true, in: folder)
        let stage = try await Stage(["--log-json", log.path] + old.map("tls10.test"))
        _ = try await stage.curl(["https://\(Stage.httpsHost)/bytes/10"])
        _ = try await stage.curl(["http://\(Stage.plainHost)/bytes/10"])
        let refused = try await stage.curl(["https://tls10.test/"])
        #expect(refused.exit == 35)
        let exchanges = try await jsonEvents(log, kind: "exchange", count: 3).compactMap { $0["url"] as? String }
        #expect(exchanges.contains("https://good.test/bytes/10"), "\(exchanges)")
        #expect(exchanges.contains("http://media-server.example.com/bytes/10"), "\(exchanges)")
        // A connection refused in its handshake (--block tls) is an exchange too, as on the console.
        #expect(exchanges.contains("https://tls10.test"), "\(exchanges)")
        withExtendedLifetime(old) {}
    }
}
