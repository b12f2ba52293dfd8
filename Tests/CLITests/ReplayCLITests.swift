import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace
import Testing
import TestSupport

/// `atsproxy replay` as a user runs it: its refusals, over a capture written by the store. The replay through a
/// running proxy, with a recording origin, is Tests/webview/replay_test.py's (`WebViewCLITests.replayEndToEnd`).
@Suite struct ReplayCLITests {
    /// A capture of one GET whose run listened on `listen`.
    static func capture(listen: String) throws -> String {
        let path = try TestScratch.folder("replay-cli").appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(
            path: path,
            run: CaptureRunInfo(
                started: 1_795_000_000, atsproxyVersion: "test", bodyLimit: 16, settings: ["listen": listen]))
        var e = ExchangeSummary(
            method: "GET", url: "http://api.example.test/a", status: 200, httpVersion: "HTTP/1.1", outcome: .allowed,
            errors: [], requestBytes: 0, responseBytes: 0, durationMilliseconds: 1)
        e.connection = ConnectionRecord(connectionID: 1)
        e.action = .relayed
        e.detail = ExchangeDetail(
            request: HTTPRequestHead(method: "GET", target: "http://api.example.test/a", headers: [("Host", "api.example.test")]),
            timings: ExchangeTimings(started: 1_795_000_000, ended: 1_795_000_001))
        try writer.write([.exchange(e)])
        try writer.close(ended: 1_795_000_002)
        return path
    }

    @Test("No such exchange: exit 1, named")
    func unknownExchange() throws {
        let path = try Self.capture(listen: "127.0.0.1:0")
        let r = try ShowCLITests.atsproxy(["replay", path, "99", "--proxy", "http://127.0.0.1:9"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("no exchange 99"), "\(r.stderr)")
    }

    @Test("Without --proxy, a run that listened on port 0 gives no address: exit 2, saying what to give")
    func noProxyAddress() throws {
        let path = try Self.capture(listen: "127.0.0.1:0")
        let r = try ShowCLITests.atsproxy(["replay", path, "1"])
        #expect(r.status == 2)
        #expect(r.stderr.contains("--proxy http://127.0.0.1:PORT"), "\(r.stderr)")
    }

    @Test("The run's fixed address is the default; a proxy that is not there: exit 1, naming the address")
    func proxyNotRunning() throws {
        // Port 9 (discard) on loopback: nothing listens there on the test machines.
        let path = try Self.capture(listen: "0.0.0.0:9")
        let r = try ShowCLITests.atsproxy(["replay", path, "1", "--timeout", "5"])
        #expect(r.status == 1)
        #expect(r.stderr.contains("cannot reach the proxy at 127.0.0.1:9"), "\(r.stderr)")
    }

    @Test("A --header without a colon is refused before anything is read")
    func badHeader() throws {
        let r = try ShowCLITests.atsproxy(["replay", "missing.atscap", "1", "--header", "X-A 1"])
        #expect(r.status != 0)
        #expect(r.stderr.contains("--header takes 'Name: value'"), "\(r.stderr)")
    }
}
