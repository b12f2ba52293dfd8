import ATSPolicy
import CaptureStore
import Foundation
import ProxyTrace

/// A small capture the capture harnesses query: one exchange of each kind the filter words and the web view tell
/// apart (verdicts, statuses and none, errors, an interruption, LIKE wildcards and quotes in URLs, an IPv6 host,
/// non-ASCII, bodies), made once per process in a scratch folder that is unlinked at once (the open readers keep it).
public enum FuzzCapture {
    /// The capture's exchanges.
    public static let total = 8

    /// Its path (unlinked once `reader` is made: a router's context only shows it).
    public static let path: String = {
        let memory = URL(fileURLWithPath: "/dev/shm")
        let base = FileManager.default.isWritableFile(atPath: memory.path) ? memory : FileManager.default.temporaryDirectory
        return base.appendingPathComponent("atsproxy-fuzz-capture-\(ProcessInfo.processInfo.processIdentifier).atscap").path
    }()

    /// A reader of the capture.
    public static let reader: CaptureReader = {
        do {
            let writer = try CaptureWriter.open(
                path: path, run: CaptureRunInfo(started: 1, atsproxyVersion: "fuzz", bodyLimit: 64, settings: [:]))
            try writer.write(exchanges)
            try writer.close(ended: 3)
            let reader = try CaptureReader(path: path)
            unlink(path)
            return reader
        } catch {
            fatalError("cannot make the fuzz capture at \(path): \(error)")
        }
    }()

    private static var exchanges: [CaptureItem] {
        func exchange(
            _ method: String, _ url: String, _ status: Int?, _ outcome: ExchangeSummary.ATSOutcome,
            errors: [ExchangeError] = [], interruption: String? = nil, body: [UInt8] = []
        ) -> CaptureItem {
            var e = ExchangeSummary(
                method: method, url: url, status: status, httpVersion: "HTTP/1.1", outcome: outcome, errors: errors,
                requestBytes: 0, responseBytes: body.count, durationMilliseconds: 1, interruption: interruption)
            e.detail = ExchangeDetail(
                timings: ExchangeTimings(started: 1, ended: 2),
                responseBody: body.isEmpty ? nil : CapturedBody(bytes: body, totalBytes: body.count))
            return .exchange(e)
        }
        let tls = ExchangeError(urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836))
        return [
            exchange("GET", "https://api.example.com/login?next=%2F&q=a_b", 200, .allowed, body: Array("{\"a\":1}".utf8)),
            exchange("POST", "https://API.Example.com/login", 401, .allowed),
            exchange("CONNECT", "https://old.example.com", nil, .blocked, errors: [tls]),
            exchange(
                "GET", "http://plain.test/'quoted\"/50%", 200, .violation,
                errors: [ExchangeError(urlError: URLErrorCode(-1022))], body: [0, 0xFF, 0x80, 0x0A]),
            exchange("GET", "https://cdn.example.com/a.js", 200, .allowed, interruption: "stream reset"),
            exchange("CONNECT", "https://pinned.test", nil, .notEvaluated),
            exchange("GET", "https://[::1]:8443/ünïcode\\path", 503, .failed),
            exchange("DELETE", "http://10.0.0.1:8080/x", 204, .allowed),
        ]
    }
}
