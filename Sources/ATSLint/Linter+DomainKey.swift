import ATSPolicy

/// Exception and pinned domain keys: the spellings that never match a connection (reference §2.2, §2.3).
extension Linter {
    /// Checks a domain key; returns its kind when the key can match a connection on this profile, else nil.
    /// `pinned` keys are compared case-insensitively by Apple (src S7), and take no IP/CIDR forms.
    mutating func checkDomainKey(_ key: String, _ path: [String], pinned: Bool) -> HostKey? {
        let section = pinned ? "NSPinnedDomains" : "NSExceptionDomains"
        let kind = HostKey.classify(key)
        switch kind {
        case .invalid(let reason):
            add(
                .invalidDomainKey, path, "\"\(key)\" cannot match any host: \(reason)",
                fix: "use the bare host name as it appears in the URL, e.g. api.example.com")
            return nil
        case .hasScheme:
            let host = Self.bareHost(key)
            add(
                .domainSchemeOrPath, path,
                "\(section) keys are host names; \"\(key)\" includes a URL scheme, so it never matches",
                fix: "use the host alone: \(host)")
            return nil
        case .hasPath:
            let host = Self.bareHost(key)
            add(
                .domainSchemeOrPath, path,
                "\(section) keys are host names; \"\(key)\" includes a path, so it never matches (ATS decides per "
                    + "host, not per URL)",
                fix: "use the host alone: \(host)")
            return nil
        case .hasPort:
            add(
                .domainHasPort, path,
                "\(section) keys take no port; \"\(key)\" never matches (an exception covers every port of the host)",
                fix: "use the host alone: \(Self.bareHost(key))")
            return nil
        case .wildcard:
            let parent = key.split(separator: ".").filter { !$0.contains("*") }.joined(separator: ".").lowercased()
            add(
                .domainWildcard, path,
                "\(section) keys take no wildcards; \"\(key)\" is looked up literally and never matches",
                fix: "use \"\(parent)\" with NSIncludesSubdomains = YES")
            return nil
        case .invalidCIDR(let reason):
            if pinned { break }
            add(
                .invalidCIDR, path, "\"\(key)\" is not a valid CIDR range (\(reason)); ATS cannot use it",
                fix: "write an address and prefix length, e.g. 192.168.0.0/16 or 2001:db8::/32")
            return nil
        case .ipAddress, .cidr:
            if pinned { break }
            if profile < .ios17 {
                let what = kind == .cidr ? "CIDR range" : "IP address"
                add(
                    .ipKeyBeforeIOS17, path,
                    "\"\(key)\" is an \(what); exception keys may be IP addresses or CIDR ranges only from iOS 17, "
                        + "so on \(profile) it never matches",
                    fix: "on \(profile), connections to IP literals need NSAllowsArbitraryLoads (iOS 9) or are exempt "
                        + "as local networking (iOS 10–16); keep this entry for iOS 17+ and, if the app supports "
                        + "earlier versions, do not rely on it there")
                return nil
            }
            return kind
        case .name:
            break
        }
        if pinned && kind != .name {
            add(
                .invalidDomainKey, path, "\"\(key)\" is not a host name; NSPinnedDomains keys are host names",
                fix: "pin by host name, e.g. api.example.com")
            return nil
        }
        if !pinned && key.contains(where: { $0.isUppercase }) {
            add(
                .domainNotLowercase, path,
                "\"\(key)\" has uppercase letters; ATS looks up the lowercase host exactly, so this entry never "
                    + "matches",
                fix: "write the key in lowercase: \(key.lowercased())")
            return nil
        }
        if key.hasSuffix(".") {
            add(
                .domainTrailingDot, path,
                "\"\(key)\" ends with a dot; it matches only URLs that spell the host with a trailing dot",
                fix: "remove the trailing dot: \(key.dropLast())")
        }
        return .name
    }

    /// The host inside a URL-like key: scheme, path, port and brackets removed.
    static func bareHost(_ key: String) -> String {
        var s = Substring(key)
        if let r = s.firstRange(of: "://") { s = s[r.upperBound...] }
        if let slash = s.firstIndex(of: "/") { s = s[..<slash] }
        if s.hasPrefix("["), let close = s.firstIndex(of: "]") {
            return String(s[s.index(after: s.startIndex)..<close])
        }
        if let colon = s.lastIndex(of: ":"), s.filter({ $0 == ":" }).count == 1 { s = s[..<colon] }
        return s.lowercased()
    }

    /// Reports keys that differ only by letter case. Exception keys are looked up exactly, so only an all-lowercase
    /// one can match; pinned keys are compared case-insensitively (src S7), so they collide.
    mutating func checkCaseDuplicates(_ keys: [String], _ base: [String], pinned: Bool = false) {
        var groups: [String: [String]] = [:]
        for key in keys { groups[key.lowercased(), default: []].append(key) }
        for key in keys {
            guard let group = groups[key.lowercased()], group.count > 1 else { continue }
            let representative = group.first(where: { $0 == $0.lowercased() }) ?? group[0]
            guard key != representative else { continue }
            let others = group.filter { $0 != key }.map { "\"\($0)\"" }.joined(separator: ", ")
            let consequence =
                pinned
                ? "Apple compares pinned hosts case-insensitively, so they pin the same host and which one applies is "
                    + "undefined"
                : "they are separate entries, and only an all-lowercase one can match"
            add(
                .duplicateKeyCase, base + [key],
                "\"\(key)\" differs from \(others) only by letter case; \(consequence)",
                fix: "merge them into one lowercase entry")
        }
    }
}
