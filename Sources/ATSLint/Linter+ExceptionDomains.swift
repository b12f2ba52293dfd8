import ATSPolicy

/// `NSExceptionDomains` entries (reference §1.2, §2.1, §2.2).
extension Linter {
    /// What an entry does once defaults fill the gaps; ignored (wrong-type, invalid) values count as absent.
    struct EntrySettings: Equatable {
        var allowsInsecureHTTP = false
        var minimumTLS = TLSVersion.tls12
        var requiresForwardSecrecy = true
        var requiresCertificateTransparency = false

        static let defaults = EntrySettings()

        var summary: String {
            var parts: [String] = []
            if allowsInsecureHTTP { parts.append("plain HTTP allowed") }
            if minimumTLS != .tls12 { parts.append("minimum \(minimumTLS.plistName)") }
            if !requiresForwardSecrecy { parts.append("no forward secrecy") }
            if requiresCertificateTransparency { parts.append("CT required") }
            return parts.isEmpty ? "ATS defaults" : parts.joined(separator: ", ")
        }
    }

    /// Hosts Apple registers its own exceptions for (reference §2.1 rule 9): an app entry for them is an override.
    static let builtInExceptionHosts = [
        "apple.com", "ls.apple.com", "gs.apple.com", "geo.apple.com", "is.autonavi.com", "apple-mapkit.com",
        "setup.icloud.com",
    ]

    /// - Parameters:
    ///   - arbitraryLoads: NSAllowsArbitraryLoads is YES and honoured on this profile.
    ///   - globallyRelaxed: some global key relaxes ATS for hosts without an entry (arbitrary loads, web, media).
    mutating func lintExceptionDomains(
        _ domains: PlistDictionary, _ base: [String], arbitraryLoads: Bool, globallyRelaxed: Bool
    ) {
        checkCaseDuplicates(domains.keys, base)
        var usable: [String: (settings: EntrySettings, includesSubdomains: Bool)] = [:]
        // Entries with findings of their own are left out of the "no effect" check: those findings explain them.
        var explained: Set<String> = []
        for (host, value) in domains {
            let path = base + [host]
            let kind = checkDomainKey(host, path, pinned: false)
            guard case .dictionary(let entry) = value else {
                add(
                    .wrongType, path,
                    "the entry for \(host) is \(article(value.typeName)) \(value.typeName), not a Dictionary; ATS "
                        + "skips it",
                    fix: "make the \(host) entry a <dict> of NSException* keys (an empty <dict/> means full ATS)")
                continue
            }
            let before = findings.count
            let (settings, includes) = lintExceptionEntry(entry, path, host: host, arbitraryLoads: arbitraryLoads)
            if findings.count > before { explained.insert(host) }
            if kind == .name { usable[host] = (settings, includes) }
        }

        for (host, entry) in usable.sorted(by: { $0.key < $1.key }) {
            let path = base + [host]
            if let (parent, parentEntry) = Self.governingParent(of: host, in: usable),
                parentEntry.settings == entry.settings
            {
                add(
                    .redundantEntry, path,
                    "the \(host) entry (\(entry.settings.summary)) is identical to what \(parent) with "
                        + "NSIncludesSubdomains already gives it, so it changes nothing",
                    fix: "remove the \(host) entry, or give it the settings that should differ from \(parent)")
            } else if Self.governingParent(of: host, in: usable) == nil, !globallyRelaxed,
                entry.settings == .defaults, !explained.contains(host), !Self.isLocalName(host),
                !Self.isBuiltInException(host)
            {
                add(
                    .entryHasNoEffect, path,
                    "the \(host) entry only restates ATS defaults, which already apply to \(host) (no global key "
                        + "relaxes ATS)",
                    fix: "remove the \(host) entry, or add the NSException* key it was meant to carry")
            }
        }
    }

    /// The entry that would govern `host` if its own entry were absent: the nearest parent with
    /// NSIncludesSubdomains = YES (src S1 `_find_parent_domain`).
    static func governingParent(
        of host: String, in entries: [String: (settings: EntrySettings, includesSubdomains: Bool)]
    ) -> (String, (settings: EntrySettings, includesSubdomains: Bool))? {
        var labels = host.split(separator: ".", omittingEmptySubsequences: false)
        while labels.count > 1 {
            labels.removeFirst()
            let parent = labels.joined(separator: ".")
            if let e = entries[parent], e.includesSubdomains { return (parent, e) }
        }
        return nil
    }

    /// Unqualified names and `.local` names are exempt by default from iOS 10 (reference §2.4); an entry for
    /// them raises requirements, so it is never "no effect".
    static func isLocalName(_ host: String) -> Bool {
        !host.contains(".") || host.hasSuffix(".local") || host.hasSuffix(".local.") || host == "localhost"
    }

    static func isBuiltInException(_ host: String) -> Bool {
        builtInExceptionHosts.contains { host == $0 || host.hasSuffix("." + $0) }
    }

    /// Lints one entry's keys and returns its effective settings and NSIncludesSubdomains.
    mutating func lintExceptionEntry(
        _ entry: PlistDictionary, _ path: [String], host: String, arbitraryLoads: Bool
    ) -> (EntrySettings, Bool) {
        var settings = EntrySettings()
        var includes = false
        for (key, value) in entry {
            let keyPath = path + [key]
            guard let k = ATSKey(rawValue: key) else {
                unknownKey(key, at: .exceptionDomain, keyPath)
                continue
            }
            guard k.levels.contains(.exceptionDomain) else {
                misplaced(k, at: .exceptionDomain, keyPath)
                continue
            }
            checkProfile(k, keyPath)
            if let current = k.legacyCounterpart {
                // Reference §1.2: Apple's open-source parser (S1) does not read these; whether CFNetwork still
                // honours them is unconfirmed. The simulator follows S1 and ignores them.
                add(
                    .legacyKey, keyPath,
                    "\(key) is an iOS 9-era spelling that Apple's current ATS parser does not read (whether CFNetwork "
                        + "still honours it is unconfirmed); this proxy ignores it",
                    fix: "rename \(key) to \(current.rawValue)"
                        + (entry[current.rawValue] != nil ? " (already present: remove \(key))" : ""))
            }
            guard checkType(k, value, keyPath), k.legacyCounterpart == nil else { continue }
            switch k {
            case .includesSubdomains:
                includes = value.boolValue == true
            case .exceptionAllowsInsecureHTTPLoads:
                settings.allowsInsecureHTTP = value.boolValue == true
            case .exceptionRequiresForwardSecrecy:
                settings.requiresForwardSecrecy = value.boolValue != false
            case .requiresCertificateTransparency:
                settings.requiresCertificateTransparency = value.boolValue == true
                add(
                    .certificateTransparencyObsolete, keyPath,
                    "NSRequiresCertificateTransparency is documented as obsolete: the system already enforces "
                        + "Certificate Transparency for publicly trusted certificates",
                    fix: "remove NSRequiresCertificateTransparency")
            case .exceptionMinimumTLSVersion:
                if let s = value.stringValue, let v = checkTLSVersion(s, keyPath) { settings.minimumTLS = v }
            default:
                break
            }
        }
        reportRelaxations(settings, path, host: host, includes: includes, arbitraryLoads: arbitraryLoads)
        return (settings, includes)
    }

    /// ATS004/005/006/008/020 for an entry's effective settings.
    mutating func reportRelaxations(
        _ s: EntrySettings, _ path: [String], host: String, includes: Bool, arbitraryLoads: Bool
    ) {
        let scope = includes ? "\(host) and all its subdomains" : host
        if s.allowsInsecureHTTP {
            add(
                .insecureHTTPException, path + [ATSKey.exceptionAllowsInsecureHTTPLoads.rawValue],
                "plain HTTP is allowed to \(scope), and the app may override failed certificate checks for it",
                fix: "serve \(host) over HTTPS and remove NSExceptionAllowsInsecureHTTPLoads")
        }
        if s.minimumTLS < .tls12 {
            let tlsPath = path + [ATSKey.exceptionMinimumTLSVersion.rawValue]
            if profile >= .ios26 {
                // Reference §1.2/§4.4: iOS 26 reportedly refuses TLS 1.0/1.1 even with this exception (OWASP MASTG,
                // X2; Apple's release note not retrieved — unconfirmed at source). The simulator follows X2.
                add(
                    .legacyTLSRefused, tlsPath,
                    "\(s.minimumTLS.plistName) has no effect on \(profile): URLSession refuses TLS 1.0 and 1.1 even "
                        + "with this exception (reported by OWASP MASTG; unconfirmed in Apple's release notes), so "
                        + "connections to \(scope) fail unless the server speaks TLS 1.2",
                    fix: "upgrade \(host) to TLS 1.2 or later and remove NSExceptionMinimumTLSVersion")
            } else {
                add(
                    .legacyTLSVersion, tlsPath,
                    "\(scope) may use \(s.minimumTLS.plistName), below ATS's TLS 1.2; App Review asks for a "
                        + "justification, and iOS 26 refuses TLS 1.0/1.1 regardless",
                    fix: "upgrade \(host) to TLS 1.2 or later and remove NSExceptionMinimumTLSVersion")
            }
        }
        if !s.requiresForwardSecrecy {
            add(
                .forwardSecrecyDisabled, path + [ATSKey.exceptionRequiresForwardSecrecy.rawValue],
                "\(scope) may use cipher suites without forward secrecy (static RSA key exchange)",
                fix: "enable ECDHE cipher suites on \(host) and remove NSExceptionRequiresForwardSecrecy")
        }
        guard arbitraryLoads else { return }
        if s.allowsInsecureHTTP {
            add(
                .reenableIncomplete, path,
                "under NSAllowsArbitraryLoads an exception entry is how a host gets ATS back, but this one keeps "
                    + "NSExceptionAllowsInsecureHTTPLoads = YES, so plain HTTP to \(scope) stays allowed, as for "
                    + "every host without an entry",
                fix: "set NSExceptionAllowsInsecureHTTPLoads to NO (or remove it) to re-secure \(host); if it needs "
                    + "plain HTTP, remove the entry")
        } else if s.minimumTLS < .tls12 || !s.requiresForwardSecrecy {
            add(
                .reenableIncomplete, path,
                "this entry re-secures \(scope) under NSAllowsArbitraryLoads only partially (\(s.summary))",
                fix: "remove the lowered TLS/forward-secrecy settings once \(host) supports them", severity: .note)
        }
    }

    /// Validates an NSExceptionMinimumTLSVersion string (src S1 accepts exactly TLSv1.0…TLSv1.3 and two DTLS
    /// names); returns the version when ATS would use it.
    mutating func checkTLSVersion(_ value: String, _ path: [String]) -> TLSVersion? {
        if let v = TLSVersion(plistName: value) { return v }
        if value == "DTLSv1.0" || value == "DTLSv1.2" {
            add(
                .invalidTLSVersion, path,
                "\(value) names a DTLS (datagram) version; Apple's parser accepts it but its meaning for HTTPS over "
                    + "TCP is unconfirmed, and this proxy keeps the TLS 1.2 default",
                fix: "use TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3", severity: .warning)
            return nil
        }
        let suggestion = Self.suggestTLSVersion(value)
        add(
            .invalidTLSVersion, path,
            "\"\(value)\" is not a TLS version ATS recognises (exactly TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3, "
                + "case-sensitive); ATS ignores it and the default TLSv1.2 applies",
            fix: suggestion.map { "write \($0.plistName)" } ?? "use TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3")
        return nil
    }

    /// `TLSV1.3` → TLSv1.3, `1.2` → TLSv1.2, `TLS 1.1` → TLSv1.1; nil when no 1.0–1.3 version can be read.
    static func suggestTLSVersion(_ value: String) -> TLSVersion? {
        let digits = value.filter { $0.isNumber || $0 == "." }
        // Only an exact 1.0…1.3 is suggested, so "TLSv1.4" (no such version) gets the list instead.
        return TLSVersion.allCases.first { digits == String($0.plistName.dropFirst(4)) }
    }
}
