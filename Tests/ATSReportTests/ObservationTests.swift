import ATSPolicy
import CaptureStore
import Foundation
import ProxyTrace
import Testing

@testable import ATSReport

@Suite("report: observations and renderings")
struct ObservationTests {
    @Test("A live record answered by the proxy's own set-up site is not an observation; the app's are")
    func proxySiteIsNotObserved() {
        var log = ObservationLog()
        for (url, action) in [("http://atsproxy.invalid/", ExchangeAction.proxySite), ("http://a.test/", .relayed)] {
            var e = ExchangeSummary(
                method: "GET", url: url, status: 200, httpVersion: "HTTP/1.1", outcome: .notEvaluated, errors: [],
                requestBytes: 0, responseBytes: 1, durationMilliseconds: 1)
            e.action = action
            log.add(e)
        }
        #expect(log.observations.map(\.url) == ["http://a.test/"])
    }

    @Test("A failure a rule injected (a fault or block rule acted) is not an observation, live or from a capture")
    func injectedIsNotObserved() throws {
        func record(_ url: String, rule: String?, action: ExchangeAction?) -> ExchangeSummary {
            var e = ExchangeSummary(
                method: "CONNECT", url: url, status: nil, kind: .refusedHandshake, outcome: .notEvaluated,
                errors: [ExchangeError(urlError: .serverCertificateUntrusted, sslError: SSLErrorCode(-9814))],
                requestBytes: 0, responseBytes: 0, durationMilliseconds: 1, note: "injected by a rule")
            if let rule { e.rules = [AppliedRule(id: "--fault #1", action: rule, point: "connection", note: "expired (injected)")] }
            if let action { e.action = action }
            return e
        }
        var live = ObservationLog()
        live.add(record("https://expired.test", rule: "fault", action: nil))
        live.add(record("https://blocked.test", rule: "block", action: nil))
        live.add(record("https://throttled.test", rule: "throttle", action: nil))
        #expect(live.observations.map(\.url) == ["https://throttled.test"])

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("report-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer {
            do { try FileManager.default.removeItem(at: folder) } catch { Issue.record("cleanup: \(error)") }
        }
        let path = folder.appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(
            path: path, run: CaptureRunInfo(started: 1, atsproxyVersion: "t", bodyLimit: 0, settings: ["ios": "17"]))
        var injected = record("https://expired.test", rule: "fault", action: .injected)
        injected.connection = ConnectionRecord(connectionID: 1)
        var app = record("https://app.test", rule: nil, action: .blockedHandshake)
        app.connection = ConnectionRecord(connectionID: 2)
        try writer.write([.exchange(injected), .exchange(app)])
        try writer.close(ended: 2)
        let captured = try ObservationLog(reading: try CaptureReader(path: path))
        #expect(captured.observations.map(\.url) == ["https://app.test"])
    }

    @Test("Connections to the same server fold into one observation; the later facts' time is kept")
    func folding() {
        var log = ObservationLog()
        log.add(https("api.example.com", completed("api.example.com", at: now), exchanges: 2))
        log.add(https("api.example.com", completed("api.example.com", at: now.addingTimeInterval(60)), exchanges: 3))
        log.add(Observation(url: "https://api.example.com/other", handshake: completed("api.example.com", version: .tls12, suite: 0xC02F)))
        #expect(log.observations.count == 2)
        #expect(log.observations[0].exchanges == 5)
        #expect(log.observations[0].handshake?.observedAt == now.addingTimeInterval(60))
        #expect(log.exchangeCount == 6)
    }

    @Test("A capture file's exchanges come back as observations with their handshake facts")
    func fromCapture() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("report-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer {
            do { try FileManager.default.removeItem(at: folder) } catch { Issue.record("cleanup: \(error)") }
        }
        let path = folder.appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(
            path: path, run: CaptureRunInfo(started: 1, atsproxyVersion: "t", bodyLimit: 0, settings: ["ios": "17"]))
        func exchange(_ url: String, _ facts: HandshakeFacts?, connection: UInt64, outcome: ExchangeSummary.ATSOutcome = .allowed)
            -> CaptureItem
        {
            var e = ExchangeSummary(
                method: "GET", url: url, status: 200, httpVersion: "HTTP/1.1", outcome: outcome, errors: [],
                requestBytes: 0, responseBytes: 10, durationMilliseconds: 1)
            e.connection = ConnectionRecord(connectionID: connection, upstreamHandshake: facts)
            return .exchange(e)
        }
        try writer.write([
            exchange("https://api.example.com/a", completed("api.example.com", at: now), connection: 1),
            exchange("https://api.example.com/b", completed("api.example.com", at: now), connection: 1),
            exchange("https://api.example.com/c", completed("api.example.com", at: now.addingTimeInterval(5)), connection: 2),
            exchange("http://media.example.com/feed", nil, connection: 3),
            exchange("https://gone.example.com/", nil, connection: 4, outcome: .failed),
        ])
        try writer.close(ended: 2)
        let log = try ObservationLog(reading: try CaptureReader(path: path))
        #expect(log.exchangeCount == 5)
        #expect(log.observations.map(\.url) == ["https://api.example.com/a", "http://media.example.com/feed", "https://gone.example.com/"])
        #expect(log.observations[0].exchanges == 3)
        #expect(log.observations[0].handshake?.version == .tls13)
        #expect(log.observations[0].handshake?.observedAt == now.addingTimeInterval(5))
        #expect(log.observations[2].carriage == .unreachable)
    }

    @Test("Text is plain unless asked for colour; Markdown has the host table; JSON carries the verdict and fragment")
    func renderings() throws {
        let r = report([https("api.example.com"), http("media.example.com")])
        #expect(!r.renderText().contains("\u{1B}["))
        #expect(r.renderText(colour: true).contains("\u{1B}[31mFAILS -1022"))
        let md = r.renderMarkdown()
        #expect(md.contains("| `media.example.com` | ❌ fails -1022 |"))
        #expect(md.contains("```xml\n<!--") || md.contains("```xml\n<key>NSAppTransportSecurity</key>"))
        let json = try #require(try JSONSerialization.jsonObject(with: Data(r.renderJSON().utf8)) as? [String: Any])
        #expect(json["fits"] as? Bool == false)
        let suggestion = try #require(json["suggestion"] as? [String: Any])
        #expect((suggestion["plist"] as? String)?.contains("NSExceptionAllowsInsecureHTTPLoads") == true)
        #expect(suggestion["verified"] as? Bool == true)
    }
}
