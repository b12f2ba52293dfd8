/// Folds identical notices: a device opens dozens of connections to the same host, and each one that hits the same
/// problem (a client that does not trust the CA, a tunnelled server that offers only TLS 1.0, `--block tls` falling
/// back to 502s) would otherwise print the same lines again. A notice is shown the first time, then at most once
/// per `interval`, with the count of the times it was not shown; `drain()` reports the counts still pending.
///
/// Sans-io: the caller passes the time and prints what comes back.
public struct RepeatedNoticeFilter: Sendable {
    /// Seconds during which a shown notice is not shown again.
    public let interval: Double
    /// Distinct notices remembered at most; beyond it the longest-unseen is forgotten (its pending count printed).
    public let capacity: Int

    private struct Entry {
        var lastShown: Double
        var lastSeen: Double
        var foldedSinceShown: Int
    }
    private var entries: [String: Entry] = [:]

    public init(interval: Double = 60, capacity: Int = 512) {
        self.interval = interval
        self.capacity = max(1, capacity)
    }

    /// The lines to print for `notice` seen at `now` (seconds on any monotonic scale): the notice itself, possibly
    /// with the count of its folded repeats; nothing while it is folded; and, when a notice had to be forgotten to
    /// stay within `capacity`, that notice's pending count.
    public mutating func admit(_ notice: String, now: Double) -> [String] {
        if var entry = entries[notice] {
            entry.lastSeen = now
            if now - entry.lastShown < interval {
                entry.foldedSinceShown += 1
                entries[notice] = entry
                return []
            }
            let line = Self.line(notice, folded: entry.foldedSinceShown)
            entries[notice] = Entry(lastShown: now, lastSeen: now, foldedSinceShown: 0)
            return [line]
        }
        var lines: [String] = []
        if entries.count >= capacity, let oldest = entries.min(by: { $0.value.lastSeen < $1.value.lastSeen }) {
            entries[oldest.key] = nil
            let folded = oldest.value.foldedSinceShown
            if folded > 0 { lines.append(Self.line(oldest.key, folded: folded)) }
        }
        entries[notice] = Entry(lastShown: now, lastSeen: now, foldedSinceShown: 0)
        lines.append(notice)
        return lines
    }

    /// The notices with folded repeats not yet reported, each with its count (for the proxy's exit), oldest first.
    public mutating func drain() -> [String] {
        let pending = entries.filter { $0.value.foldedSinceShown > 0 }
            .sorted { $0.value.lastShown < $1.value.lastShown }
        for (notice, _) in pending { entries[notice]?.foldedSinceShown = 0 }
        return pending.map { Self.line($0.key, folded: $0.value.foldedSinceShown) }
    }

    static func line(_ notice: String, folded: Int) -> String {
        guard folded > 0 else { return notice }
        return notice + " [and \(folded) more time\(folded == 1 ? "" : "s") since it was last shown]"
    }
}
