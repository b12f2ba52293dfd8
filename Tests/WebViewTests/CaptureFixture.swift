import ATSPolicy
import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace
import TestSupport

/// A capture with known content, in a folder of its own: 40 exchanges over four hosts (ids 1…40, in order), with
/// a blocked exchange (id 40) that has a violation, a fix, bodies and trace records.
struct CaptureFixture {
    let path: String
    let writer: CaptureWriter

    static let run = CaptureRunInfo(
        started: 1_700_000_000, atsproxyVersion: "test", bodyLimit: 4096,
        settings: ["ats": "enforce", "ios": "26", "block": "http", "policy": "Test.plist"])

    /// Exchange `i` (1-based): host h(i % 4).test; POST when i % 5 == 0; status 200, or 503 when i % 6 == 0; all ok.
    static func plain(_ i: Int) -> ExchangeSummary {
        var e = ExchangeSummary(
            method: i % 5 == 0 ? "POST" : "GET", url: "https://h\(i % 4).test/item/\(i)?q=\(i)",
            status: i % 6 == 0 ? 503 : 200, httpVersion: i % 2 == 0 ? "HTTP/2.0" : "HTTP/1.1", outcome: .allowed,
            errors: [], requestBytes: 10, responseBytes: 100 * i, durationMilliseconds: Double(i))
        e.connection = ConnectionRecord(
            connectionID: UInt64(i), decision: PolicyDecision(keyPath: [], reason: "ATS defaults"), violations: [])
        e.action = .relayed
        e.detail = ExchangeDetail(
            request: HTTPRequestHead(method: e.method, target: "/item/\(i)?q=\(i)", headers: [("Host", "h\(i % 4).test")]),
            response: HTTPResponseHead(status: e.status ?? 0, headers: [("Content-Type", "application/json")]),
            timings: ExchangeTimings(started: 1_700_000_000 + Double(i), ended: 1_700_000_000 + Double(i) + 0.01),
            requestBody: CapturedBody(bytes: [], totalBytes: 0),
            responseBody: CapturedBody(bytes: Array("{\"n\":\(i)}".utf8), totalBytes: 7 + String(i).count))
        return e
    }

    static let blockedURL = "https://old.test/login"

    /// A load the policy refused (TLS 1.0 upstream), answered 502 by the proxy, with an HTML body.
    static func blocked() -> ExchangeSummary {
        var e = ExchangeSummary(
            method: "POST", url: blockedURL, status: 502, httpVersion: "HTTP/1.1", outcome: .blocked,
            errors: [ExchangeError(urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836))],
            requestBytes: 12, responseBytes: 300, durationMilliseconds: 4.5)
        let violation = ATSViolation(
            kind: .tlsVersionTooLow, urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836),
            explanation: "the server negotiated TLSv1.0; ATS requires TLS 1.2",
            fix: .setKeys(domain: "old.test", keys: [FixKey(key: "NSExceptionMinimumTLSVersion", value: .string("TLSv1.0"))]))
        e.connection = ConnectionRecord(
            connectionID: 99, clientAddress: "127.0.0.1:5000",
            clientTLS: TLSLegFacts(version: "TLSv1.3", cipherSuite: "TLS_AES_128_GCM_SHA256", alpn: "http/1.1",
                                   serverName: "old.test", resumed: false),
            upstreamTLS: TLSLegFacts(version: "TLSv1", cipherSuite: "ECDHE-RSA-AES128-SHA", alpn: nil,
                                     serverName: "old.test", resumed: false),
            decision: PolicyDecision(
                keyPath: ["NSAppTransportSecurity", "NSExceptionDomains", "old.test"], reason: "exact entry"),
            violations: [violation])
        e.action = .blockedAnswer
        e.detail = ExchangeDetail(
            request: HTTPRequestHead(
                method: "POST", target: "/login", headers: [("Host", "old.test"), ("Content-Type", "text/plain"),
                                                            ("X-Token", "it's")]),
            clientResponse: HTTPResponseHead(status: 502, reason: "Bad Gateway", headers: [("Content-Type", "text/html")]),
            timings: ExchangeTimings(started: 1_700_000_100, ended: 1_700_000_100.0045),
            requestBody: CapturedBody(bytes: Array("user=a".utf8), totalBytes: 6),
            responseBody: CapturedBody(bytes: Array("<script>alert(1)</script>".utf8), totalBytes: 300))
        return e
    }

    static func trace(_ title: String, connection: UInt64, time: Double) -> CaptureItem {
        var record = DiagnosticsRecord(title: title, subject: "old.test:443", fields: [.init("Connection ID", "99")])
        record.connectionID = connection
        return .trace(record, time: time)
    }

    /// Creates the capture; the writer stays open (as in a running proxy) until `close()`.
    init() throws {
        let folder = try TestScratch.folder("webview")
        path = folder.appendingPathComponent("c.atscap").path
        writer = try CaptureWriter.open(path: path, run: Self.run)
        var items: [CaptureItem] = (1...39).map { .exchange(Self.plain($0)) }
        items.append(Self.trace("TCP Connection", connection: 99, time: 1_700_000_099))
        items.append(Self.trace("ATS Decision", connection: 99, time: 1_700_000_100.001))
        items.append(.exchange(Self.blocked()))
        try writer.write(items)
    }

    func close() throws {
        try writer.close(ended: 1_700_001_000)
    }
}
