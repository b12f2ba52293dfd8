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

    var json: String {
        func number(_ value: Double?, _ digits: Int) -> String {
            guard let value, value.isFinite else { return "null" }
            return String(format: "%.\(digits)f", value)
        }
        let codes = tally.statusCodes.map { "\"\($0.code)\":\($0.count)" }.joined(separator: ",")
        let kinds = tally.errorKinds.sorted { $0.key < $1.key }
            .map { "\(Self.jsonString($0.key)):\($0.value)" }.joined(separator: ",")
        let perRequest = tally.requests > 0 ? cpuSeconds / Double(tally.requests) * 1e6 : nil
        let fields = [
            "\"requests\":\(tally.requests)",
            "\"errors\":\(tally.errors)",
            "\"connections_opened\":\(tally.connectionsOpened)",
            "\"seconds\":\(number(seconds, 4))",
            "\"rps\":\(number(requestsPerSecond, 1))",
            "\"p50_ms\":\(number(percentileMilliseconds(0.5), 3))",
            "\"p90_ms\":\(number(percentileMilliseconds(0.9), 3))",
            "\"p99_ms\":\(number(percentileMilliseconds(0.99), 3))",
            "\"status_codes\":{\(codes)}",
            "\"bytes\":\(tally.bodyBytes)",
            "\"client_cpu_seconds\":\(number(cpuSeconds, 3))",
            "\"client_cpu_us_per_request\":\(number(perRequest, 2))",
            "\"complete\":\(isComplete)",
            "\"error_kinds\":{\(kinds)}",
        ]
        return "{" + fields.joined(separator: ",") + "}"
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

    /// A JSON string literal (quotes, backslashes and control characters escaped).
    static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    out += String(format: "\\u%04x", scalar.value)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}
