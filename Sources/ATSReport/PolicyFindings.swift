import ATSPolicy

/// Finds the judged policy's exceptions that the observations did not use, or used less of than they grant. Each
/// check asks ATSPolicy: which entry governs each observed host (`exceptionMatch`), and whether the observed loads
/// still pass with a key taken out (the dictionary edited and decoded again).
struct PolicyFindings {
    let policy: ReportPolicy
    let app: ATSPolicy
    let judged: [(observation: Observation, judgement: Judgement)]

    private let domains = ["NSAppTransportSecurity", "NSExceptionDomains"]

    func all() -> [PolicyFinding] {
        var out: [PolicyFinding] = []
        for entry in app.exceptionDomains where entry.origin == .app {
            out += publicSuffixFindings(entry)
            out += entryFindings(entry)
        }
        out += arbitraryLoadsFindings()
        return out
    }

    /// Observations whose host the entry governs, and how it matched.
    private func governed(by entry: ExceptionDomainEntry) -> [(observation: Observation, how: ExceptionMatch.How)] {
        judged.compactMap { item in
            guard let match = app.exceptionMatch(for: item.observation.host), match.entry.key == entry.key,
                match.entry.origin == .app
            else { return nil }
            return (item.observation, match.how)
        }
    }

    /// An entry with `NSIncludesSubdomains` on a name anyone can register under: whatever was observed, it relaxes
    /// ATS for sites that are not the app's.
    private func publicSuffixFindings(_ entry: ExceptionDomainEntry) -> [PolicyFinding] {
        guard entry.includesSubdomains, entry.kind == .dnsName, let what = PublicSuffixes.kind(of: entry.key) else {
            return []
        }
        let hosts = distinct(governed(by: entry).map(\.observation.host))
        return [
            PolicyFinding(
                kind: .subdomainsOfPublicSuffix, keyPath: domains + [entry.key, ATSKey.includesSubdomains.rawValue],
                problem: "NSIncludesSubdomains = YES on \(entry.key), \(what): the exception covers every site "
                    + "registered under it, not only the app's",
                advice: hosts.isEmpty
                    ? "name the app's own domain instead (its registered name under \(entry.key))"
                    : "name the app's own domains instead: \(list(hosts))",
                hosts: hosts)
        ]
    }

    private func entryFindings(_ entry: ExceptionDomainEntry) -> [PolicyFinding] {
        let path = domains + [entry.key]
        let matched = governed(by: entry)
        let hosts = distinct(matched.map(\.observation.host))
        guard !matched.isEmpty else {
            // Subdomains the entry would have covered with NSIncludesSubdomains (ATSPolicy's parent walk passes an
            // entry without it over, and names it only when a higher entry then matches).
            let passedOver =
                entry.includesSubdomains || entry.kind != .dnsName
                ? [] : distinct(judged.map(\.observation.host).filter { $0.hasSuffix("." + entry.key) })
            var problem = "no observed host matched it"
            if !passedOver.isEmpty {
                problem += " (it was passed over for \(list(passedOver)): it has no NSIncludesSubdomains = YES)"
            }
            return [
                PolicyFinding(
                    kind: .unusedEntry, keyPath: path, problem: problem,
                    advice: "remove the entry if the app no longer loads from \(entry.key); this capture never did",
                    hosts: passedOver)
            ]
        }
        var out: [PolicyFinding] = []
        if entry.includesSubdomains && matched.allSatisfy({ if case .exact = $0.how { true } else { false } }) {
            out.append(
                PolicyFinding(
                    kind: .subdomainsOnlyApex, keyPath: path + [ATSKey.includesSubdomains.rawValue],
                    problem: "NSIncludesSubdomains = YES, but only \(entry.key) itself was observed; no subdomain "
                        + "used the entry",
                    advice: "remove NSIncludesSubdomains so the exception covers \(entry.key) alone", hosts: hosts))
        }
        if let minimum = entry.minimumTLSVersion, minimum < .tls12 {
            out += minimumTLSFindings(entry, minimum, matched.map(\.observation), path: path, hosts: hosts)
        }
        if entry.allowsInsecureHTTPLoads {
            out += insecureHTTPFindings(entry, matched.map(\.observation), path: path, hosts: hosts)
        }
        return out
    }

    private func minimumTLSFindings(
        _ entry: ExceptionDomainEntry, _ minimum: TLSVersion, _ loads: [Observation], path: [String], hosts: [String]
    ) -> [PolicyFinding] {
        let key = path + [ATSKey.exceptionMinimumTLSVersion.rawValue]
        let versions = loads.compactMap { o -> TLSVersion? in
            guard o.target?.isSecure == true, let facts = o.handshake else { return nil }
            return ATSPolicy.judgedFacts(facts).0.version
        }
        guard let needed = versions.min() else {
            return [
                PolicyFinding(
                    kind: .minimumTLSTooLow, keyPath: key,
                    problem: "NSExceptionMinimumTLSVersion = \(minimum.plistName), but no HTTPS handshake with "
                        + "\(list(hosts)) was observed, so nothing observed needs it",
                    advice: "remove NSExceptionMinimumTLSVersion unless a load this capture did not exercise needs it",
                    hosts: hosts)
            ]
        }
        guard minimum < needed else { return [] }
        let advice =
            needed >= .tls12
            ? "remove NSExceptionMinimumTLSVersion (TLS 1.2, the default, is enough for every observed server)"
            : "raise NSExceptionMinimumTLSVersion to \(needed.plistName)"
        return [
            PolicyFinding(
                kind: .minimumTLSTooLow, keyPath: key,
                problem: "NSExceptionMinimumTLSVersion = \(minimum.plistName), but every observed server of the "
                    + "entry negotiated \(needed.plistName) or later",
                advice: advice, hosts: hosts)
        ]
    }

    private func insecureHTTPFindings(
        _ entry: ExceptionDomainEntry, _ loads: [Observation], path: [String], hosts: [String]
    ) -> [PolicyFinding] {
        guard !loads.contains(where: { $0.target.map { !$0.isSecure } ?? false }) else { return [] }
        // The key also drops the ATS certificate minimums and, without forward secrecy, the ATS suite list: it is
        // over-broad only if the HTTPS loads still pass without it.
        let key = ATSKey.exceptionAllowsInsecureHTTPLoads.rawValue
        let without = ATSPolicy(
            atsDictionary: policy.atsDictionary.map { Self.removing(key, fromEntry: entry.key, in: $0) },
            options: policy.options)
        let before = loads.map { app.judge($0).verdict }
        let after = loads.map { without.judge($0).verdict }
        guard zip(before, after).allSatisfy({ $0 == .fails || $1 != .fails }) else { return [] }
        return [
            PolicyFinding(
                kind: .insecureHTTPOnlyHTTPS, keyPath: path + [key],
                problem: "NSExceptionAllowsInsecureHTTPLoads = YES, but \(list(hosts)) "
                    + (hosts.count == 1 ? "was" : "were") + " only loaded over HTTPS, and those loads pass without it",
                advice: "remove NSExceptionAllowsInsecureHTTPLoads: it allows cleartext and loosens trust for nothing "
                    + "observed",
                hosts: hosts)
        ]
    }

    /// NSAllowsArbitraryLoads in effect when at most one host it governs needs anything.
    private func arbitraryLoadsFindings() -> [PolicyFinding] {
        let key = ATSKey.allowsArbitraryLoads.rawValue
        guard app.allowsArbitraryLoads == true, arbitraryLoadsInEffect else { return [] }
        let governed = judged.filter { $0.judgement.decision?.keyPath.last == key }
        let without = ATSPolicy(
            atsDictionary: policy.atsDictionary.map { Self.removingTopLevel(key, in: $0) }, options: policy.options)
        var needy: [String] = []
        var violations: [ATSViolation] = []
        for item in governed {
            let j = without.judge(item.observation)
            guard j.verdict == .fails else { continue }
            if !needy.contains(item.observation.host) { needy.append(item.observation.host) }
            violations += j.violations
        }
        guard needy.count <= 1 else { return [] }
        let path = ["NSAppTransportSecurity", key]
        let governedHosts = distinct(governed.map(\.observation.host))
        if let host = needy.first {
            let fix = ATSVerdict.blocked(violations).combinedFix
            let advice =
                fix.map { "replace it with an exception for \(host) alone: \($0.summary)" }
                ?? "remove it: \(host) needs it, but no exception can make \(host) pass ATS either; fix the server"
            return [
                PolicyFinding(
                    kind: .arbitraryLoadsTooBroad, keyPath: path,
                    problem: "NSAllowsArbitraryLoads = YES turns ATS off for every host without an entry, but of "
                        + "the \(governedHosts.count) observed, only \(host) needed anything",
                    advice: advice, hosts: [host])
            ]
        }
        return [
            PolicyFinding(
                kind: .arbitraryLoadsTooBroad, keyPath: path,
                problem: governedHosts.isEmpty
                    ? "NSAllowsArbitraryLoads = YES, but every observed host has its own exception entry, so it "
                        + "governed none of them"
                    : "NSAllowsArbitraryLoads = YES, but every observed host it governs (\(list(governedHosts))) "
                        + "passes full ATS without it",
                advice: "remove NSAllowsArbitraryLoads", hosts: governedHosts)
        ]
    }

    /// Whether the decision order lets NSAllowsArbitraryLoads decide a host no entry covers: on iOS 10+ another
    /// global key silences it (the decoder's diagnostics and `explain` say so). Asked of ATSPolicy with a name no
    /// app can have an entry for (`.invalid` is reserved, RFC 6761) rather than re-deriving the rule.
    private var arbitraryLoadsInEffect: Bool {
        let probe = ConnectionTarget(scheme: "http", host: "atsproxy-report-probe.invalid")
        return app.requirements(for: probe).decision?.keyPath.last == ATSKey.allowsArbitraryLoads.rawValue
    }

    // MARK: Editing the dictionary

    static func removing(_ key: String, fromEntry domain: String, in ats: PlistValue) -> PlistValue {
        guard var root = ats.dictionaryValue, let domains = root[ATSKey.exceptionDomains.rawValue]?.dictionaryValue
        else { return ats }
        var edited = PlistDictionary()
        for (name, value) in domains {
            if name == domain, let entry = value.dictionaryValue {
                edited.set(name, .dictionary(PlistDictionary(entry.entries.filter { $0.key != key })))
            } else {
                edited.set(name, value)
            }
        }
        root.set(ATSKey.exceptionDomains.rawValue, .dictionary(edited))
        return .dictionary(root)
    }

    static func removingTopLevel(_ key: String, in ats: PlistValue) -> PlistValue {
        guard let root = ats.dictionaryValue else { return ats }
        return .dictionary(PlistDictionary(root.entries.filter { $0.key != key }))
    }

    private func distinct(_ names: [String]) -> [String] {
        var seen: [String] = []
        for n in names where !seen.contains(n) { seen.append(n) }
        return seen
    }

    private func list(_ names: [String]) -> String {
        names.count <= 3 ? names.joined(separator: ", ") : names.prefix(3).joined(separator: ", ") + " and \(names.count - 3) more"
    }
}
