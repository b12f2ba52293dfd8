import Foundation

/// The outcome of a run, as one JSON object or a short human summary.
struct LoadReport {
    var tally: LoadTally
    /// The number of responses the run was asked for.
    var requested: Int
    /// Wall time from opening the first connection to the last response.
    var seconds: Double
    /// CPU time the client used meanwhile (all threads, user plus system).
    var cpuSeconds: Double
    /// Why the run ended early (deadline, too many errors); nil when it completed.
    var stopReason: String?

    /// Whether every requested response completed.
    var isComplete: Bool { stopReason == nil && tally.requests >= requested }

    var requestsPerSecond: Double { seconds > 0 ? Double(tally.requests) / seconds : 0 }

    /// A latency percentile in milliseconds; nil without responses.
    func percentileMilliseconds(_ fraction: Double) -> Double? {
        tally.latency.percentile(fraction).map { Double($0) / 1e6 }
    }

    /// The machine-readable form that `benchmarks/proxybench.py` reads. Every key is always present: a percentile
    /// without responses is null, not missing.
    private struct JSONForm: Encodable {
        var requests: Int
        var errors: Int
        var connectionsOpened: Int
        var seconds: Double
        var rps: Double
        var p50: Double?
        var p90: Double?
        var p99: Double?
        var statusCodes: [String: Int]
        var bodyBytes: Int
        var cpuSeconds: Double
        var cpuPerRequest: Double?
        var complete: Bool
        var errorKinds: [String: Int]

        enum CodingKeys: String, CodingKey {
            case requests, errors, seconds, rps, complete
            case connectionsOpened = "connections_opened"
            case p50 = "p50_ms", p90 = "p90_ms", p99 = "p99_ms"
            case statusCodes = "status_codes"
            case bodyBytes = "bytes"
            case cpuSeconds = "client_cpu_seconds"
            case cpuPerRequest = "client_cpu_us_per_request"
            case errorKinds = "error_kinds"
        }

        func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(requests, forKey: .requests)
            try c.encode(errors, forKey: .errors)
            try c.encode(connectionsOpened, forKey: .connectionsOpened)
            try c.encode(seconds, forKey: .seconds)
            try c.encode(rps, forKey: .rps)
            try c.encode(p50, forKey: .p50)
            try c.encode(p90, forKey: .p90)
            try c.encode(p99, forKey: .p99)
            try c.encode(statusCodes, forKey: .statusCodes)
            try c.encode(bodyBytes, forKey: .bodyBytes)
            try c.encode(cpuSeconds, forKey: .cpuSeconds)
            try c.encode(cpuPerRequest, forKey: .cpuPerRequest)
            try c.encode(complete, forKey: .complete)
            try c.encode(errorKinds, forKey: .errorKinds)
        }
    }

    /// One JSON object on one line.
    func json() throws -> String {
        let form = JSONForm(
            requests: tally.requests, errors: tally.errors, connectionsOpened: tally.connectionsOpened,
            seconds: seconds, rps: requestsPerSecond, p50: percentileMilliseconds(0.5),
            p90: percentileMilliseconds(0.9), p99: percentileMilliseconds(0.99),
            statusCodes: Dictionary(tally.statusCodes.map { (String($0.code), $0.count) }, uniquingKeysWith: +),
            bodyBytes: tally.bodyBytes, cpuSeconds: cpuSeconds,
            cpuPerRequest: tally.requests > 0 ? cpuSeconds / Double(tally.requests) * 1e6 : nil,
            complete: isComplete, errorKinds: tally.errorKinds)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(form), as: UTF8.self)
    }

    var summary: String {
        func ms(_ fraction: Double) -> String {
            percentileMilliseconds(fraction).map { String(format: "%.3f ms", $0) } ?? "-"
        }
        var lines = [
            String(
                format: "%d of %d requests in %.3f s: %.1f requests/s", tally.requests, requested, seconds,
                requestsPerSecond),
            "latency: p50 \(ms(0.5)), p90 \(ms(0.9)), p99 \(ms(0.99))",
            "status codes: "
                + (tally.statusCodes.isEmpty ? "none" : tally.statusCodes.map { "\($0.code) ×\($0.count)" }.joined(separator: ", ")),
            "body bytes: \(tally.bodyBytes); connections opened: \(tally.connectionsOpened); errors: \(tally.errors)",
            String(
                format: "client CPU: %.3f s (%.1f µs per request)", cpuSeconds,
                tally.requests > 0 ? cpuSeconds / Double(tally.requests) * 1e6 : 0),
        ]
        for (kind, count) in tally.errorKinds.sorted(by: { $0.value > $1.value }) {
            lines.append("  \(count) × \(kind)")
        }
        if let stopReason { lines.append("incomplete: \(stopReason)") }
        return lines.joined(separator: "\n")
    }
}
