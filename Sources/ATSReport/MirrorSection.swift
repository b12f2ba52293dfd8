import CaptureStore
import ProxyTrace

/// What the devices did in `--ats mirror` runs of a capture: the proxy's exit summary (`MirrorCounts`), again, and
/// each disagreement between the simulation and the device with its host. Independent of the policy `report`
/// judges: it is the verdicts of the run's own `--plist` (or none) against the devices' own ATS.
public struct MirrorSection: Sendable, Codable {
    public struct Row: Sendable, Codable {
        public var kind: String
        public var count: MirrorCounts.Count
    }

    public struct Disagreement: Sendable, Codable {
        public var host: String
        public var url: String
        public var text: String
    }

    /// Whether the runs had a plist to compare the devices with.
    public var compared: Bool
    /// Connections by violation kind, in name order.
    public var rows: [Row]
    public var total: MirrorCounts.Count
    public var disagreements: [Disagreement]
    /// The summary as the proxy printed it at exit.
    public var summary: String

    /// nil when the capture has no mirrored connection.
    public init?(verdicts: [CapturedMirrorVerdict]) {
        var counts = MirrorCounts()
        for v in verdicts { counts.count(v.record) }
        compared = verdicts.contains { $0.record.simulated != nil }
        guard let summary = counts.summary(compared: compared, prefix: "") else { return nil }
        self.summary = summary
        rows = counts.byKind.map { Row(kind: $0.kind, count: $0.count) }
        total = counts.total
        disagreements = verdicts.compactMap { v in
            v.record.disagreement.map { Disagreement(host: v.host, url: v.url, text: $0) }
        }
    }
}
