import Foundation

/// `--ats mirror`: what the devices did with the mirrored connections, counted by violation kind (the simulated
/// verdict's first violation, `none` when it allowed the connection; without a plist, Apple's defaults judged it),
/// for the summary at exit. Thread-safe: every loop thread counts into the one tally.
public final class MirrorTally: @unchecked Sendable {
    // @unchecked: every access to `counts` holds `lock`.
    private let lock = NSLock()
    private var counts: [String: Count] = [:]

    /// One violation kind's connections.
    public struct Count: Sendable, Equatable {
        public var accepted = 0
        public var refused = 0
        public var agreements = 0
        public var disagreements = 0
    }

    /// Counts one connection's device verdict; `agreed` is nil when no plist is loaded (nothing to compare).
    func count(kind: String, deviceAccepted: Bool, agreed: Bool?) {
        lock.lock()
        defer { lock.unlock() }
        var c = counts[kind] ?? Count()
        if deviceAccepted { c.accepted += 1 } else { c.refused += 1 }
        if let agreed {
            if agreed { c.agreements += 1 } else { c.disagreements += 1 }
        }
        counts[kind] = c
    }

    /// The counts by kind, in name order.
    public var byKind: [(kind: String, count: Count)] {
        lock.lock()
        defer { lock.unlock() }
        return counts.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// The summary printed at exit, or nil when no connection was mirrored. `compared`: a plist was loaded.
    public func summary(compared: Bool) -> String? {
        let rows = byKind
        guard !rows.isEmpty else { return nil }
        let total = rows.reduce(Count()) { sum, row in
            Count(
                accepted: sum.accepted + row.count.accepted, refused: sum.refused + row.count.refused,
                agreements: sum.agreements + row.count.agreements,
                disagreements: sum.disagreements + row.count.disagreements)
        }
        let connections = total.accepted + total.refused
        var text = "atsproxy: mirror summary: \(connections) connection\(connections == 1 ? "" : "s"), the device "
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
