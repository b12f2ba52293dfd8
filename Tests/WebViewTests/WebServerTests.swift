import CaptureStore
import Foundation
import ProxyEventLoop
import ProxyTrace
import Testing

@testable import WebView

/// The server on a real event loop and socket: framing, keep-alive, access rules and the live stream.
@Suite("Web view server")
struct WebServerTests {
    /// A server on 127.0.0.1 (a free port) over a fresh fixture capture, stopped by `stop()`.
    final class Running {
        let fixture: CaptureFixture
        let group: EventLoopGroup
        let feed = LiveFeed(delay: .milliseconds(20))
        let port: Int

        /// `extensions`: the report and HAR export, when the test wires them (as `run --web` does, with three readers).
        init(credentials: ProxyCredentials? = nil, extensions: WebViewExtensions? = nil) throws {
            fixture = try CaptureFixture()
            group = try EventLoopGroup(loopCount: 1)
            var context = WebRouterTests.context(fixture.path)
            if let extensions { context.extensions = extensions }
            let router = WebRouter(
                reader: try CaptureReader(path: fixture.path), streamReader: try CaptureReader(path: fixture.path),
                exportReader: try CaptureReader(path: fixture.path), context: context)
            let server = WebServer(router: router, feed: feed, credentials: credentials)
            port = Int(try server.listen(on: group, host: "127.0.0.1", port: 0).port)
        }

        func stop() {
            group.shutdownGracefully(timeout: .seconds(1))
        }

        func connect() throws -> BlockingTCPClient {
            try BlockingTCPClient(host: "127.0.0.1", port: port, timeout: 5)
        }
    }

    /// Reads until `text` has arrived (or the peer closed, or 5 s passed) and returns everything read.
    static func read(_ client: BlockingTCPClient, until text: String, seconds: Double = 5) throws -> String {
        var got = ""
        let deadline = Date().addingTimeInterval(seconds)
        while !got.contains(text), Date() < deadline {
            guard let bytes = try client.receive(timeout: max(0.05, deadline.timeIntervalSinceNow)) else { break }
            got += String(decoding: bytes, as: UTF8.self)
        }
        return got
    }

    static func send(_ client: BlockingTCPClient, _ text: String) throws {
        try client.send(Array(text.utf8), timeout: 5)
    }

    @Test("Pipelined requests on one keep-alive connection are answered in order, with lengths")
    func keepAlive() throws {
        let server = try Running()
        defer { server.stop() }
        let client = try server.connect()
        defer { client.close() }
        try Self.send(client, "GET /api/exchanges/count HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            + "GET /api/exchanges/99999 HTTP/1.1\r\nHost: localhost\r\n\r\n"
            + "HEAD / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let text = try Self.read(client, until: "\u{0}")  // until closed
        // Bodies end without a line break: each status line starts right after the previous body.
        let statuses = text.matches(of: /HTTP\/1\.1 (\d{3})/).map { String($0.output.1) }
        #expect(statuses == ["200", "404", "200"])
        #expect(text.contains("{\"count\":40}"))
        #expect(text.contains("no exchange 99999"))
        #expect(!text.contains("<!DOCTYPE html>"))  // HEAD: no body
    }

    @Test("While a HAR export takes seconds, the list and /api/info are answered; every answer says same-origin only")
    func slowExportHoldsNothing() throws {
        let release = DispatchSemaphore(value: 0)
        let exporting = DispatchSemaphore(value: 0)
        // An export as slow as the test wants: it reads the capture, then waits to be released (at most 10 s).
        let server = try Running(extensions: WebViewExtensions(harExport: { reader, _ in
            let count = try reader.count()
            exporting.signal()
            _ = release.wait(timeout: .now() + 10)
            return Array("{\"exported\":\(count)}".utf8)
        }))
        defer { server.stop() }
        let export = try server.connect()
        defer { export.close() }
        try Self.send(export, "GET /api/har HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        #expect(exporting.wait(timeout: .now() + 5) == .success)
        let other = try server.connect()
        defer { other.close() }
        let started = Date()
        try Self.send(other, "GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            + "GET /api/exchanges?limit=5 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        let answers = try Self.read(other, until: "\u{0}", seconds: 5)  // until closed
        #expect(Date().timeIntervalSince(started) < 4, "the list waited for the export")
        #expect(answers.matches(of: /HTTP\/1\.1 200\s/).count == 2, "\(answers)")
        #expect(answers.contains("\"capturePath\""))
        #expect(answers.matches(of: /Cross-Origin-Resource-Policy: same-origin\r\n/).count == 2)
        release.signal()
        let exported = try Self.read(export, until: "{\"exported\":40}")
        #expect(exported.hasPrefix("HTTP/1.1 200 "), "\(exported)")
        #expect(exported.contains("Cross-Origin-Resource-Policy: same-origin\r\n"))
    }

    @Test("A Host that is not loopback is refused (DNS rebinding); a malformed request is answered 400")
    func hostAndMalformed() throws {
        let server = try Running()
        defer { server.stop() }
        let client = try server.connect()
        defer { client.close() }
        try Self.send(client, "GET /api/info HTTP/1.1\r\nHost: evil.example:8081\r\n\r\n")
        #expect(try Self.read(client, until: "\u{0}").hasPrefix("HTTP/1.1 421 "))
        let other = try server.connect()
        defer { other.close() }
        try Self.send(other, "GET /api/info HTTP/1.1\r\nHost: a\r\nBad Field\r\n\r\n")
        #expect(try Self.read(other, until: "\u{0}").hasPrefix("HTTP/1.1 400 "))
    }

    @Test("With credentials, every request needs them in Authorization: Basic")
    func credentials() throws {
        let server = try Running(credentials: try ProxyCredentials(parsing: "qa:secret"))
        defer { server.stop() }
        let client = try server.connect()
        defer { client.close() }
        try Self.send(client, "GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let refused = try Self.read(client, until: "}")
        #expect(refused.hasPrefix("HTTP/1.1 401 "))
        #expect(refused.contains("WWW-Authenticate: Basic realm=\"ATSProxy web view\""))
        let token = Data("qa:secret".utf8).base64EncodedString()
        try Self.send(client, "GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic \(token)\r\n\r\n")
        #expect(try Self.read(client, until: "}").hasPrefix("HTTP/1.1 200 "))
    }

    @Test("The stream sends new exchanges as the capture commits them, and only those matching its filter")
    func liveStream() throws {
        let server = try Running()
        defer { server.stop() }
        let client = try server.connect()
        defer { client.close() }
        try Self.send(client, "GET /api/stream?verdict=blocked HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let hello = try Self.read(client, until: "event: hello\ndata: {\"after\":40}\n\n")
        #expect(hello.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"))
        #expect(hello.contains("Cross-Origin-Resource-Policy: same-origin\r\n"))
        #expect(server.feed.subscriberCount == 1)
        try server.fixture.writer.write([.exchange(CaptureFixture.plain(41)), .exchange(CaptureFixture.blocked())])
        server.feed.consume(.exchange(CaptureFixture.blocked()))
        let event = try Self.read(client, until: "\n\n")
        #expect(event.hasPrefix("event: exchanges\ndata: {\"exchanges\":[{"))
        #expect(event.contains("\"id\":42"))
        #expect(!event.contains("\"id\":41"))
        client.close()
        // The closed stream leaves the feed.
        let deadline = Date().addingTimeInterval(5)
        while server.feed.subscriberCount > 0, Date() < deadline { usleep(10_000) }
        #expect(server.feed.subscriberCount == 0)
    }
}
