extension ATSPolicy {
    /// Decodes the value of `NSAppTransportSecurity`. nil (key absent) means full ATS for every host.
    ///
    /// Types are strict, as in Apple's parser (reference §1.2, src S1): a Boolean key given a string (`"YES"`) is
    /// ignored and its default applies; every such event is recorded in `diagnostics`.
    public init(atsDictionary: PlistValue?, options: PolicyOptions = .init()) {
        var decoder = PolicyDecoder(options: options)
        let root = ["NSAppTransportSecurity"]
        var dict = PlistDictionary()
        var declared = false
        if let value = atsDictionary {
            if let d = value.dictionaryValue {
                dict = d
                declared = true
            } else {
                decoder.report(
                    root, .error,
                    "must be a Dictionary but is a \(value.typeName); iOS ignores it, so full ATS applies")
            }
        }
        decoder.checkKeys(of: dict, at: .topLevel, path: root)

        let profile = options.profile
        let arbitrary = decoder.bool(dict, .allowsArbitraryLoads, path: root)
        let media = decoder.bool(dict, .allowsArbitraryLoadsForMedia, path: root)
        let web = decoder.bool(dict, .allowsArbitraryLoadsInWebContent, path: root)
        let local = decoder.bool(dict, .allowsLocalNetworking, path: root)
        let niap = decoder.string(dict, .requiresNIAPTLSPackageVersion, path: root)
        if niap != nil {
            decoder.report(
                root + [ATSKey.requiresNIAPTLSPackageVersion.rawValue], .warning,
                "NIAP TLS package mode is not simulated: its accepted values and effects are unconfirmed")
        }

        var appEntries: [ExceptionDomainEntry] = []
        if let raw = dict[ATSKey.exceptionDomains.rawValue] {
            let path = root + [ATSKey.exceptionDomains.rawValue]
            if let domains = raw.dictionaryValue {
                for (key, value) in domains {
                    if let entry = decoder.exceptionEntry(key: key, value: value, path: path + [key]) {
                        appEntries.removeAll { $0.key == key }
                        appEntries.append(entry)
                    }
                }
            } else {
                // src S1: a non-dictionary NSExceptionDomains stops parsing; the global keys already read stay.
                decoder.report(
                    path, .error, "must be a Dictionary but is a \(raw.typeName); no exception applies")
            }
        }

        var pins: [PinnedDomainEntry] = []
        if let raw = dict[ATSKey.pinnedDomains.rawValue] {
            let path = root + [ATSKey.pinnedDomains.rawValue]
            if profile < ATSKey.pinnedDomains.introduced {
                decoder.report(path, .info, "identity pinning exists only from iOS 14; ignored on \(profile)")
            } else if let domains = raw.dictionaryValue {
                for (key, value) in domains {
                    if let entry = decoder.pinnedEntry(key: key, value: value, path: path + [key]) {
                        pins.removeAll { $0.domain == entry.domain }
                        pins.append(entry)
                    }
                }
            } else {
                decoder.report(path, .error, "must be a Dictionary but is a \(raw.typeName); no pins apply")
            }
        }

        let appKeys = Set(appEntries.map(\.key))
        let builtIns = options.builtInExceptions ? ATSPolicy.builtInExceptions.filter { !appKeys.contains($0.key) } : []
        for key in ATSPolicy.builtInExceptions.map(\.key) where options.builtInExceptions && appKeys.contains(key) {
            decoder.report(
                root + [ATSKey.exceptionDomains.rawValue, key], .info,
                "replaces Apple's built-in exception for \(key)")
        }

        self.init(
            options: options, isDeclared: declared, allowsArbitraryLoads: arbitrary,
            allowsArbitraryLoadsForMedia: media, allowsArbitraryLoadsInWebContent: web, allowsLocalNetworking: local,
            requiresNIAPTLSPackageVersion: niap, exceptionDomains: builtIns + appEntries, pinnedDomains: pins,
            diagnostics: decoder.diagnostics)
    }
}

/// Reads typed values out of plist dictionaries, recording every rejection.
struct PolicyDecoder {
    let options: PolicyOptions
    var diagnostics: [PolicyDiagnostic] = []
    /// Legacy keys honoured on the entry being read.
    private var honouredLegacy: [String] = []

    init(options: PolicyOptions) { self.options = options }

    mutating func report(_ path: [String], _ severity: PolicyDiagnostic.Severity, _ problem: String) {
        diagnostics.append(PolicyDiagnostic(keyPath: path, severity: severity, problem: problem))
    }

    /// Flags unknown keys and keys that belong at another level.
    mutating func checkKeys(of dict: PlistDictionary, at level: ATSKey.Level, path: [String]) {
        for name in dict.keys {
            guard let key = ATSKey(rawValue: name) else {
                let hint =
                    name == "NSExceptionAllowsLocalNetworking"
                    ? " (not a real key: use NSAllowsLocalNetworking at the top level)" : ""
                let near = ATSKey.allCases.first { $0.rawValue.lowercased() == name.lowercased() }
                let spelling = near.map { " (did you mean \($0.rawValue)? keys are case-sensitive)" } ?? ""
                report(path + [name], .warning, "unknown key\(hint)\(spelling); iOS ignores it")
                continue
            }
            if !key.levels.contains(level) {
                report(path + [name], .warning, "not valid at this level (\(level.rawValue)); iOS ignores it here")
            }
        }
    }

    /// A Boolean key. Apple's open-source parser accepts any NSNumber (so `<integer>1</integer>` is YES, src S1
    /// `[value isEqual:@YES]`; a reading of the source, unconfirmed on devices); any other type is ignored. Keys the
    /// profile predates are ignored too. nil = absent or ignored.
    mutating func bool(_ dict: PlistDictionary, _ key: ATSKey, path: [String]) -> Bool? {
        guard let value = dict[key.rawValue] else { return nil }
        let p = path + [key.rawValue]
        if options.profile < key.introduced {
            report(p, .info, "\(options.profile) does not know this key (from \(key.introduced)); ignored")
            return nil
        }
        switch value {
        case .bool(let b): return b
        case .integer(let i):
            report(
                p, .warning,
                "an Integer, not a Boolean: read as Apple's open-source parser reads any number (1 = YES, "
                    + "else NO; unconfirmed on iOS itself); write <\(i == 1)/>")
            return i == 1
        case .real(let r):
            report(
                p, .warning,
                "a Real, not a Boolean: read as Apple's open-source parser reads any number (1 = YES, "
                    + "else NO; unconfirmed on iOS itself); write <\(r == 1)/>")
            return r == 1
        default:
            report(
                p, .error,
                "must be a Boolean but is a \(value.typeName) (\(display(value))); iOS ignores it and "
                    + "the default applies")
            return nil
        }
    }

    /// A String key; any other type is ignored.
    mutating func string(_ dict: PlistDictionary, _ key: ATSKey, path: [String]) -> String? {
        guard let value = dict[key.rawValue] else { return nil }
        let p = path + [key.rawValue]
        if options.profile < key.introduced {
            report(p, .info, "\(options.profile) does not know this key (from \(key.introduced)); ignored")
            return nil
        }
        guard let s = value.stringValue else {
            report(p, .error, "must be a String but is a \(value.typeName); iOS ignores it and the default applies")
            return nil
        }
        return s
    }

    /// Parses a minimum-TLS string: only the exact spellings Apple's parser accepts (reference §1.2, src S1/S4).
    mutating func tlsVersion(_ text: String, path: [String]) -> TLSVersion? {
        if text == "DTLSv1.0" || text == "DTLSv1.2" {
            report(path, .error, "\"\(text)\" is a DTLS version, meaningless for HTTPS; the default TLSv1.2 applies")
            return nil
        }
        guard let v = TLSVersion(plistName: text) else {
            report(
                path, .error,
                "\"\(text)\" is not one of TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3 (exact spelling); "
                    + "iOS ignores it and the default TLSv1.2 applies")
            return nil
        }
        if v == .tls13 && options.profile < .ios14 {
            // TLS 1.3 reached URLSession in iOS 12.2 (doc A17); the iOS 9/10 parsers had no such value.
            report(
                path, .error,
                "TLSv1.3 is unknown on \(options.profile) (TLS 1.3 arrived in iOS 12.2); the default "
                    + "TLSv1.2 applies")
            return nil
        }
        if v < .tls12 {
            if options.profile >= .ios26 {
                report(
                    path, .warning,
                    "\(options.profile) refuses TLS 1.0/1.1 even with this exception (reported by OWASP MASTG, "
                        + "not by Apple's documentation)")
            } else {
                report(path, .info, "lowering the minimum below TLSv1.2 needs an App Review justification")
            }
        }
        return v
    }

    mutating func exceptionEntry(key: String, value: PlistValue, path: [String]) -> ExceptionDomainEntry? {
        guard let dict = value.dictionaryValue else {
            report(path, .error, "an exception must be a Dictionary but is a \(value.typeName); entry skipped")
            return nil
        }
        checkKeys(of: dict, at: .exceptionDomain, path: path)

        let kind: ExceptionDomainEntry.Kind
        if key.contains("/") {
            if let range = CIDRRange(key: key) {
                kind = .cidr(range)
            } else {
                report(path, .error, "not valid CIDR notation (e.g. 10.0.0.0/8, 2001:db8::/32); never matches")
                kind = .invalidCIDR
            }
        } else if let ip = IPAddress(key), !key.contains("%") {
            kind = .ipAddress(ip)
        } else {
            kind = .dnsName
            checkDomainKey(key, path: path)
        }
        if kind != .dnsName && options.profile < .ios17 {
            report(
                path, .warning,
                "IP address and CIDR keys work only from iOS 17; on \(options.profile) this entry "
                    + "never matches")
        }

        var entry = ExceptionDomainEntry(key: key, kind: kind, origin: .app)
        honouredLegacy = []
        var fixKeys: [FixKey] = []
        if let b = bool(dict, .includesSubdomains, path: path) {
            entry.includesSubdomains = b
            if b { fixKeys.append(FixKey(key: ATSKey.includesSubdomains.rawValue, value: .bool(true))) }
        }
        if let b = resolvedBool(dict, .exceptionAllowsInsecureHTTPLoads, path: path) {
            entry.allowsInsecureHTTPLoads = b
            if b { fixKeys.append(FixKey(key: ATSKey.exceptionAllowsInsecureHTTPLoads.rawValue, value: .bool(true))) }
        }
        if let v = resolvedTLSVersion(dict, path: path) {
            entry.minimumTLSVersion = v
            fixKeys.append(FixKey(key: ATSKey.exceptionMinimumTLSVersion.rawValue, value: .string(v.plistName)))
        }
        if let b = resolvedBool(dict, .exceptionRequiresForwardSecrecy, path: path) {
            entry.requiresForwardSecrecy = b
            if !b { fixKeys.append(FixKey(key: ATSKey.exceptionRequiresForwardSecrecy.rawValue, value: .bool(false))) }
        }
        if let b = bool(dict, .requiresCertificateTransparency, path: path) {
            entry.requiresCertificateTransparency = b
            report(
                path + [ATSKey.requiresCertificateTransparency.rawValue], .warning,
                "obsolete: the system enforces CT for publicly trusted certificates anyway")
            if b {
                fixKeys.append(FixKey(key: ATSKey.requiresCertificateTransparency.rawValue, value: .bool(true)))
            }
        }
        entry.requiresNIAPTLSPackageVersion = string(dict, .exceptionRequiresNIAPTLSPackageVersion, path: path)
        if entry.requiresNIAPTLSPackageVersion != nil {
            report(
                path + [ATSKey.exceptionRequiresNIAPTLSPackageVersion.rawValue], .warning,
                "NIAP TLS package mode is not simulated: its accepted values and effects are unconfirmed")
        }
        entry.effectiveKeys = fixKeys
        entry.honouredLegacyKeys = honouredLegacy
        return entry
    }

    /// A Boolean exception key, falling back to its legacy spellings when the options honour them.
    private mutating func resolvedBool(_ dict: PlistDictionary, _ key: ATSKey, path: [String]) -> Bool? {
        let current = bool(dict, key, path: path)
        var legacyValue: Bool?
        for legacy in ATSKey.allCases where legacy.legacyCounterpart == key && dict[legacy.rawValue] != nil {
            if options.honoursLegacyKeys {
                let v = bool(dict, legacy, path: path)
                if legacyValue == nil { legacyValue = v }
                legacyNote(legacy, honoured: true, shadowed: current != nil, path: path)
            } else {
                legacyNote(legacy, honoured: false, shadowed: false, path: path)
            }
        }
        return current ?? legacyValue
    }

    private mutating func resolvedTLSVersion(_ dict: PlistDictionary, path: [String]) -> TLSVersion? {
        func read(_ key: ATSKey, _ decoder: inout PolicyDecoder) -> TLSVersion? {
            guard let s = decoder.string(dict, key, path: path) else { return nil }
            return decoder.tlsVersion(s, path: path + [key.rawValue])
        }
        let current = read(.exceptionMinimumTLSVersion, &self)
        var legacyValue: TLSVersion?
        for legacy in ATSKey.allCases
        where legacy.legacyCounterpart == .exceptionMinimumTLSVersion && dict[legacy.rawValue] != nil {
            if options.honoursLegacyKeys {
                let v = read(legacy, &self)
                if legacyValue == nil { legacyValue = v }
                legacyNote(legacy, honoured: true, shadowed: current != nil, path: path)
            } else {
                legacyNote(legacy, honoured: false, shadowed: false, path: path)
            }
        }
        return current ?? legacyValue
    }

    private mutating func legacyNote(_ key: ATSKey, honoured: Bool, shadowed: Bool, path: [String]) {
        let counterpart = key.legacyCounterpart?.rawValue ?? ""
        let reading = "legacy iOS 9-era key; whether iOS still honours it is unconfirmed"
        if !honoured {
            report(
                path + [key.rawValue], .warning,
                "\(reading): ignored under the current reading (legacy keys: \(options.legacyKeys.rawValue)); "
                    + "use \(counterpart)")
        } else if shadowed {
            report(path + [key.rawValue], .info, "\(reading): \(counterpart) on the same entry takes precedence")
        } else {
            honouredLegacy.append(key.rawValue)
            report(
                path + [key.rawValue], .info,
                "\(reading): honoured as \(counterpart) (legacy keys: \(options.legacyKeys.rawValue))")
        }
    }

    /// Spelling mistakes in a DNS exception key (reference §2.2).
    private mutating func checkDomainKey(_ key: String, path: [String]) {
        if key != key.lowercased() {
            report(
                path, .warning,
                "contains uppercase letters: keys are looked up by exact string and hosts are "
                    + "lowercase, so this entry will not match \(key.lowercased())")
        }
        if key.contains("*") {
            report(path, .warning, "wildcards are not supported; use the parent domain with NSIncludesSubdomains")
        }
        if key.contains(":") {
            report(path, .warning, "keys must not carry a port or scheme; this entry will not match")
        }
        if key.hasSuffix(".") {
            report(path, .info, "the trailing dot is significant: this entry matches only hosts written with it")
        }
        if key.isEmpty || key.hasPrefix(".") {
            report(path, .warning, "not a host name; this entry will not match")
        }
    }

    mutating func pinnedEntry(key: String, value: PlistValue, path: [String]) -> PinnedDomainEntry? {
        guard let dict = value.dictionaryValue else {
            report(path, .error, "a pinned domain must be a Dictionary but is a \(value.typeName); entry skipped")
            return nil
        }
        checkKeys(of: dict, at: .pinnedDomain, path: path)
        let includes = bool(dict, .includesSubdomains, path: path) ?? false
        let leaf = identities(dict, .pinnedLeafIdentities, path: path)
        let ca = identities(dict, .pinnedCAIdentities, path: path)
        if leaf.isEmpty && ca.isEmpty {
            report(
                path, .error,
                "needs NSPinnedCAIdentities or NSPinnedLeafIdentities with at least one "
                    + "SPKI-SHA256-BASE64; entry ignored")
            return nil
        }
        var domain = key.lowercased()
        if domain.hasSuffix(".") { domain.removeLast() }
        return PinnedDomainEntry(domain: domain, includesSubdomains: includes, leafSPKISHA256: leaf, caSPKISHA256: ca)
    }

    private mutating func identities(_ dict: PlistDictionary, _ key: ATSKey, path: [String]) -> [String] {
        guard let raw = dict[key.rawValue] else { return [] }
        let p = path + [key.rawValue]
        guard let array = raw.arrayValue else {
            report(p, .error, "must be an Array but is a \(raw.typeName); ignored")
            return []
        }
        var out: [String] = []
        for (i, item) in array.enumerated() {
            let ip = p + ["[\(i)]"]
            guard let d = item.dictionaryValue else {
                report(ip, .error, "each identity must be a Dictionary with SPKI-SHA256-BASE64; ignored")
                continue
            }
            guard let s = d[ATSKey.spkiSHA256Base64.rawValue]?.stringValue else {
                report(ip, .error, "missing SPKI-SHA256-BASE64 String; ignored")
                continue
            }
            if !Self.looksLikeSHA256Base64(s) {
                report(
                    ip + [ATSKey.spkiSHA256Base64.rawValue], .warning,
                    "\"\(s)\" is not a base64 SHA-256 digest (44 characters ending in '='); it can never match")
            }
            out.append(s)
        }
        return out
    }

    static func looksLikeSHA256Base64(_ s: String) -> Bool {
        s.count == 44 && s.hasSuffix("=") && !s.dropLast().contains("=")
            && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "+/=".contains($0)) }
    }

    private func display(_ value: PlistValue) -> String {
        switch value {
        case .string(let s): "\"\(s)\""
        case .integer(let i): String(i)
        default: value.typeName
        }
    }
}
