/// `--ats mirror`'s connections counted by violation kind (the simulated verdict's first violation, `none` when it
/// allowed the connection): how many the device accepted and refused and, when a plist was compared, how many
/// agreed with the simulation. A value: the proxy's tally at exit (`MirrorTally`) and `atsproxy report` on a capture
/// count with it and print the same summary.
public struct MirrorCounts: Sendable, Equatable {
    /// One violation kind's connections.
    public struct Count: Sendable, Equatable, Codable {
        public var accepted = 0
        public var refused = 0
        public var agreements = 0
        public var disagreements = 0

        public init(accepted: Int = 0, refused: Int = 0, agreements: Int = 0, disagreements: Int = 0) {
            self.accepted = accepted
            self.refused = refused
            self.agreements = agreements
            self.disagreements = disagreements
        }
    }

    private var counts: [String: Count] = [:]

    public init() {}

    /// Counts one connection; `agreed` is nil when no plist was compared.
    public mutating func count(kind: String, deviceAccepted: Bool, agreed: Bool?) {
        var c = counts[kind] ?? Count()
        if deviceAccepted { c.accepted += 1 } else { c.refused += 1 }
        if let agreed {
            if agreed { c.agreements += 1 } else { c.disagreements += 1 }
        }
        counts[kind] = c
    }

    /// Counts one connection's record: compared when it carries a simulated verdict, agreed when no disagreement.
    public mutating func count(_ record: MirrorRecord) {
        count(
            kind: record.simulatedKind ?? "none", deviceAccepted: record.deviceAccepted,
            agreed: record.simulated == nil ? nil : record.disagreement == nil)
    }

    /// The counts by kind, in name order.
    public var byKind: [(kind: String, count: Count)] {
        counts.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// Every kind together.
    public var total: Count {
        counts.values.reduce(Count()) { sum, c in
            Count(
                accepted: sum.accepted + c.accepted, refused: sum.refused + c.refused,
                agreements: sum.agreements + c.agreements, disagreements: sum.disagreements + c.disagreements)
        }
    }

    /// `mirror summary: 3 connections, the device accepted 1, …` and a line per kind, or nil when nothing was
    /// mirrored. `compared`: a plist was loaded, so agreements are shown.
    public func summary(compared: Bool, prefix: String = "atsproxy: ") -> String? {
        let rows = byKind
        guard !rows.isEmpty else { return nil }
        let total = total
        let connections = total.accepted + total.refused
        var text = prefix + "mirror summary: \(connections) connection\(connections == 1 ? "" : "s"), the device "
            + "accepted \(total.accepted), refused \(total.refused)"
        if compared { text += "; \(total.agreements) agreed with the simulation, \(total.disagreements) disagreed" }
        text += "\n"
        for (kind, c) in rows {
            text += "  \(kind): accepted \(c.accepted), refused \(c.refused)"
            if compared { text += "; agreed \(c.agreements), disagreed \(c.disagreements)" }
            text += "\n"
        }
        return text
    }
}
