import ATSPolicy

/// The narrowest `NSAppTransportSecurity` that lets every observed load through that an exception can let through:
/// an exact-host entry per host that needs one, holding only the keys ATSPolicy's fixes ask for (each with the
/// hosts and reasons that need it), plus the judged policy's `NSPinnedDomains` (pins only tighten).
///
/// Built by fixpoint: start from Apple's defaults, judge every observation, merge the fixes of the loads whose
/// every violation has one, and judge again (a fix can expose the next check: a TLS 1.0 server without forward
/// secrecy needs two keys) until nothing changes. Then checked: every fixable observation is judged under the
/// result, and `ExplainReport` is run on every fixable URL, as `atsproxy explain --plist` would.
public struct SuggestedPolicy: Sendable, Codable {
    /// One key of an entry, with who needs it.
    public struct Key: Sendable, Codable {
        public var key: String
        public var value: PlistValue
        /// Why: `tls10.test: server supports only TLSv1.0; ATS requires TLSv1.2 or later`.
        public var reasons: [String]
    }

    /// One `NSExceptionDomains` entry.
    public struct Entry: Sendable, Codable {
        public var domain: String
        public var keys: [Key]
        /// The observed hosts that need the entry (the domain itself: entries are exact hosts).
        public var neededBy: [String]
    }

    /// A load no exception can let through.
    public struct Unfixable: Sendable, Codable {
        public var host: String
        public var url: String
        public var reasons: [String]
    }

    /// One load checked against the suggestion.
    public struct Check: Sendable, Codable {
        public var url: String
        /// Under the suggestion, with the load's handshake facts.
        public var verdict: LoadVerdict
        /// What `atsproxy explain --plist SUGGESTION URL` says: `full-ats`, `exception`, `no-ats` or `blocked`.
        public var explainVerdict: String
    }

    public var entries: [Entry]
    /// `NSPinnedDomains` carried over from the judged policy, when it had one.
    public var pinnedDomains: PlistValue?
    public var unfixable: [Unfixable]
    /// Every observed load an exception can let through (those that already pass included), judged under the
    /// suggestion.
    public var checks: [Check]
    /// Where the pins came from, for the fragment's comment.
    public var pinsSource: String?

    /// True when every such load passes under the suggestion and `explain` refuses none of their URLs.
    public var verified: Bool { checks.allSatisfy { $0.verdict != .fails && $0.explainVerdict != "blocked" } }

    /// The suggestion as the value of `NSAppTransportSecurity`.
    public var atsDictionary: PlistValue {
        var ats = PlistDictionary()
        if !entries.isEmpty {
            var domains = PlistDictionary()
            for entry in entries {
                var keys = PlistDictionary()
                for k in entry.keys { keys.set(k.key, k.value) }
                domains.set(entry.domain, .dictionary(keys))
            }
            ats.set(ATSKey.exceptionDomains.rawValue, .dictionary(domains))
        }
        if let pinnedDomains { ats.set(ATSKey.pinnedDomains.rawValue, pinnedDomains) }
        return .dictionary(ats)
    }

    /// Builds and checks the suggestion for `observations`; `app` supplies the pins to keep.
    public init(observations: [Observation], options: PolicyOptions, app: ReportPolicy?) {
        entries = []
        unfixable = []
        checks = []
        pinnedDomains = app?.atsDictionary?.dictionaryValue?[ATSKey.pinnedDomains.rawValue]
        pinsSource = pinnedDomains == nil ? nil : app?.source
        // Bounded: a round that changes nothing ends the loop, and each change adds a key or makes a value more
        // permissive, of which there are a few per host.
        for _ in 0..<(4 * max(1, observations.count) + 1) {
            guard addFixes(observations, options: options) else { break }
        }
        let policy = ATSPolicy(atsDictionary: atsDictionary, options: options)
        var fixable: [Observation] = []
        for o in observations {
            let j = policy.judge(o)
            if j.verdict == .fails && !j.isFixable {
                var reasons: [String] = []
                for v in j.violations {
                    if case .noExceptionCanHelp(let reason) = v.fix, !reasons.contains(reason) { reasons.append(reason) }
                }
                unfixable.append(Unfixable(host: o.host, url: o.url, reasons: reasons))
            } else if o.target != nil {
                fixable.append(o)
            }
        }
        let explain = ExplainReport(policy: policy, urls: fixable.map(\.url), source: "suggested policy")
        checks = zip(fixable, explain.items).map { o, item in
            Check(url: o.url, verdict: policy.judge(o).verdict, explainVerdict: item.verdict)
        }
    }

    /// One round: judges every observation under the suggestion so far and merges the fixes of the failing loads
    /// that can be fixed. Returns whether anything changed.
    private mutating func addFixes(_ observations: [Observation], options: PolicyOptions) -> Bool {
        let policy = ATSPolicy(atsDictionary: atsDictionary, options: options)
        let before = entries
        var changed = false
        for o in observations {
            let j = policy.judge(o)
            guard j.verdict == .fails, j.isFixable else { continue }
            for v in j.violations {
                guard case .setKeys(let domain, let keys) = v.fix else { continue }
                let current = before.first { $0.domain == domain }?.keys ?? []
                for k in keys {
                    // Keys the fix carries over from the entry as it was are not this violation's.
                    let own = !current.contains { $0.key == k.key && $0.value == k.value }
                    let reason = "\(o.host): \(v.explanation)"
                    if merge(domain: domain, key: k, reason: own ? reason : nil, host: o.host) { changed = true }
                }
            }
        }
        return changed
    }

    /// Sets `key` on `domain`'s entry, keeping the more permissive value when both ask for it. Returns whether the
    /// value changed.
    private mutating func merge(domain: String, key: FixKey, reason: String?, host: String) -> Bool {
        var index = entries.firstIndex { $0.domain == domain }
        if index == nil {
            entries.append(Entry(domain: domain, keys: [], neededBy: []))
            index = entries.count - 1
        }
        guard let i = index else { return false }
        if !entries[i].neededBy.contains(host) { entries[i].neededBy.append(host) }
        guard let k = entries[i].keys.firstIndex(where: { $0.key == key.key }) else {
            entries[i].keys.append(Key(key: key.key, value: key.value, reasons: reason.map { [$0] } ?? []))
            return true
        }
        if let reason, !entries[i].keys[k].reasons.contains(reason) { entries[i].keys[k].reasons.append(reason) }
        let merged = Self.morePermissive(key.key, entries[i].keys[k].value, key.value)
        guard merged != entries[i].keys[k].value else { return false }
        entries[i].keys[k].value = merged
        return true
    }

    /// Of two values two loads ask for, the one that lets both through.
    private static func morePermissive(_ key: String, _ a: PlistValue, _ b: PlistValue) -> PlistValue {
        switch key {
        case ATSKey.exceptionMinimumTLSVersion.rawValue:
            guard let va = a.stringValue.flatMap(TLSVersion.init(plistName:)),
                let vb = b.stringValue.flatMap(TLSVersion.init(plistName:))
            else { return b }
            return va <= vb ? a : b
        case ATSKey.exceptionRequiresForwardSecrecy.rawValue:
            return a == .bool(false) ? a : b
        case ATSKey.exceptionAllowsInsecureHTTPLoads.rawValue, ATSKey.includesSubdomains.rawValue:
            return a == .bool(true) ? a : b
        default:
            return b
        }
    }
}
