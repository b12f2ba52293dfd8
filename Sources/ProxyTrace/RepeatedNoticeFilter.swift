/// Folds identical notices: a device opens dozens of connections to the same host, and each one that hits the same
/// problem (a client that does not trust the CA, a tunnelled server that offers only TLS 1.0, `--block tls` falling
/// back to 502s) would otherwise print the same lines again. A notice is shown the first time, then at most once
/// per `interval`, with the count of the times it was not shown; `drain()` reports the counts still pending.
/// Notices whose text varies (a malformed ClientHello's detail, the host of a failed client handshake) are folded
/// by a `kind` instead: the first is shown, the rest of that kind counted as "more like it".
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
        /// The text last shown (for a kind, the latest instance's text is shown when the interval has passed).
        var text: String
        /// Some folded repeat differed in text from the one shown (a kind's other hosts or details).
        var variedSinceShown = false
    }
    private var entries: [String: Entry] = [:]

    public init(interval: Double = 60, capacity: Int = 512) {
        self.interval = interval
        self.capacity = max(1, capacity)
    }

    /// The lines to print for `notice` seen at `now` (seconds on any monotonic scale): the notice itself, possibly
    /// with the count of its folded repeats; nothing while it is folded; and, when a notice had to be forgotten to
    /// stay within `capacity`, that notice's pending count.
    public mutating func admit(_ notice: String, kind: String? = nil, now: Double) -> [String] {
        let key = kind.map { "kind:" + $0 } ?? "text:" + notice
        if fold(notice, key: key, now: now) { return [] }
        if let entry = entries[key] {
            let line = Self.line(notice, folded: entry.foldedSinceShown, varied: entry.variedSinceShown)
            entries[key] = Entry(lastShown: now, lastSeen: now, foldedSinceShown: 0, text: notice)
            return [line]
        }
        var lines: [String] = []
        if entries.count >= capacity, let oldest = entries.min(by: { $0.value.lastSeen < $1.value.lastSeen }) {
            entries[oldest.key] = nil
            let old = oldest.value
            if old.foldedSinceShown > 0 {
                lines.append(Self.line(old.text, folded: old.foldedSinceShown, varied: old.variedSinceShown))
            }
        }
        entries[key] = Entry(lastShown: now, lastSeen: now, foldedSinceShown: 0, text: notice)
        lines.append(notice)
        return lines
    }

    /// Counts `notice` as folded and returns true when `admit` would fold it at `now` (it, or a notice of its kind,
    /// was shown less than `interval` ago); otherwise changes nothing and returns false, and the notice is to be
    /// admitted as usual. For a sink that prints on another thread: the repeats it folds here, on the thread that
    /// made them, are never queued, and that thread never wakes the printing one for them.
    public mutating func foldIfShownRecently(_ notice: String, kind: String? = nil, now: Double) -> Bool {
        fold(notice, key: kind.map { "kind:" + $0 } ?? "text:" + notice, now: now)
    }

    private mutating func fold(_ notice: String, key: String, now: Double) -> Bool {
        guard var entry = entries[key], now - entry.lastShown < interval else { return false }
        entry.lastSeen = now
        entry.foldedSinceShown += 1
        if notice != entry.text { entry.variedSinceShown = true }
        entries[key] = entry
        return true
    }

    /// The notices with folded repeats not yet reported, each with its count (for the proxy's exit), oldest first.
    public mutating func drain() -> [String] {
        let pending = entries.filter { $0.value.foldedSinceShown > 0 }
            .sorted { $0.value.lastShown < $1.value.lastShown }
        for (key, _) in pending {
            entries[key]?.foldedSinceShown = 0
            entries[key]?.variedSinceShown = false
        }
        return pending.map { Self.line($0.value.text, folded: $0.value.foldedSinceShown, varied: $0.value.variedSinceShown) }
    }

    /// The notice with its folded count: "more times" when every repeat was the same text, "more like it" when
    /// some were of the same kind with other details.
    static func line(_ notice: String, folded: Int, varied: Bool = false) -> String {
        guard folded > 0 else { return notice }
        if varied { return notice + " [and \(folded) more like it since it was last shown]" }
        return notice + " [and \(folded) more time\(folded == 1 ? "" : "s") since it was last shown]"
    }
}
