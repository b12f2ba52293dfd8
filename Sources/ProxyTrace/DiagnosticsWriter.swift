import HTTP1Core
/// Formats `DiagnosticsRecord`s into CFNetwork's envelope:
///
/// ```
/// CFNetwork Diagnostics [1:7] 14:02:11.372 {
/// 	TCP Connection Start: (null)
/// 	          Connection: 0x7
/// 	       Connection ID: 7
/// } [1:7]
/// ```
///
/// `[L:N]` carries the configured level and a per-process sequence number (reference §5.2, obs P2/P3). One
/// writer per output; records and fields above the configured level are dropped. The levels, as CFNetwork's:
/// 1 the summary records (the load, its connection, the ATS decision, the response status, how it ended); 2 adds
/// the request and response headers and the TLS details (suite, group, certificates, trust); 3 adds the bytes
/// (`SSL-READ`/`SSL-WRITE` hex dumps of the plaintext). docs/device.md lists them.
public struct DiagnosticsWriter: Sendable {
    /// 1–3, as `--diagnostics N` or `CFNETWORK_DIAGNOSTICS=N` sets it; 0 writes nothing.
    public let level: Int
    private var sequence = 0

    public init(level: Int) { self.level = max(0, min(3, level)) }

    /// The rendered record with a trailing newline, or nil when the level filters it out.
    public mutating func render(_ record: DiagnosticsRecord, at time: TraceTime) -> String? {
        guard level > 0, record.level <= level else { return nil }
        sequence += 1
        let tag = "[\(level):\(sequence)]"
        let fields = record.fields.filter { $0.level <= level }
        let keys = [record.title] + fields.map(\.key)
        let width = keys.map(\.count).max() ?? 0
        func line(_ key: String, _ value: String) -> String {
            "\t" + String(repeating: " ", count: width - key.count) + key + ": " + value + "\n"
        }
        var out = "CFNetwork Diagnostics \(tag) \(time) {\n"
        out += line(record.title, record.subject)
        for field in fields {
            // Multi-line values (header dumps, hex) keep CFNetwork's tab indentation on continuation lines.
            // Header values that are not UTF-8 are shown as Latin-1 (FieldBytes keeps their bytes escaped).
            let parts = FieldBytes.display(field.value).split(separator: "\n", omittingEmptySubsequences: false)
            out += line(field.key, String(parts.first ?? ""))
            for rest in parts.dropFirst() { out += "\t" + String(repeating: " ", count: width + 2) + rest + "\n" }
        }
        out += "} \(tag)\n"
        return out
    }
}
