import Foundation
import TestSupport
import Testing

/// Runs the built `atsproxy-load` with `arguments`; returns its exit status and its standard output as JSON.
func runLoadClient(_ arguments: [String]) throws -> (status: Int32, report: [String: Any]) {
    let binary = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug/atsproxy-load")
    let run = try runCommand(binary.path, arguments + ["--json"])
    let report = try JSONSerialization.jsonObject(with: run.stdout) as? [String: Any]
    return (run.status, report ?? [:])
}

@Suite("atsproxy-load against a local server")
struct LoadBinaryTests {
    @Test("Keep-alive: exactly -c connections carry -n requests, both framings, no errors")
    func keepAlive() throws {
        let body = (0..<700).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let server = try KeepAliveServer(body: body)
        let run = try runLoadClient(
            ["--url", "http://127.0.0.1:\(server.port)/1k", "-c", "4", "-n", "300", "--timeout", "30"])
        #expect(run.status == 0, "\(run.report)")
        #expect(run.report["requests"] as? Int == 300)
        #expect(run.report["errors"] as? Int == 0)
        #expect(run.report["connections_opened"] as? Int == 4)
        #expect(run.report["bytes"] as? Int == 300 * 700)
        #expect((run.report["status_codes"] as? [String: Int]) == ["200": 300])
        #expect((run.report["p50_ms"] as? Double ?? 0) > 0)
        #expect(server.accepted == 4)
        #expect(server.responses == 300)
    }

    @Test("A server that closes connections: each close is an error and a replacement; all requests complete")
    func replacesClosedConnections() throws {
        let server = try KeepAliveServer(body: Array("hello".utf8), closeEvery: 10)
        let run = try runLoadClient(
            ["--url", "http://127.0.0.1:\(server.port)/", "-c", "3", "-n", "200", "--timeout", "30"])
        #expect(run.status == 0, "\(run.report)")
        #expect(run.report["requests"] as? Int == 200)
        let errors = run.report["errors"] as? Int ?? 0
        #expect(errors >= 10, "about one close per 10 responses")
        #expect(run.report["connections_opened"] as? Int == 3 + errors)
        #expect((run.report["error_kinds"] as? [String: Int])?.keys.first?.contains("Connection: close") == true)
    }

    @Test("Nothing listening: the run gives up after --max-errors and exits non-zero")
    func refusedPort() throws {
        let port = try KeepAliveServer(body: []).port  // released at once: nothing listens there any more
        let run = try runLoadClient(
            ["--url", "http://127.0.0.1:\(port)/", "-c", "2", "-n", "10", "--max-errors", "3", "--timeout", "30"])
        #expect(run.status != 0)
        #expect(run.report["requests"] as? Int == 0)
        #expect(run.report["complete"] as? Bool == false)
        #expect((run.report["errors"] as? Int ?? 0) > 3)
    }
}
