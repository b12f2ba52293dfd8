import ATSPolicy

/// Checks shared by every level: unknown and misplaced keys, value types, keys absent on the profile.
extension Linter {
    /// Where a level sits, in words, for "belongs …" messages.
    static func placeName(_ level: ATSKey.Level) -> String {
        switch level {
        case .topLevel: "at the top level of NSAppTransportSecurity"
        case .exceptionDomain: "inside an exception domain (NSExceptionDomains › host)"
        case .pinnedDomain: "inside a pinned domain (NSPinnedDomains › host)"
        case .pinnedIdentity: "inside a pinned identity (an element of NSPinnedCAIdentities/NSPinnedLeafIdentities)"
        }
    }

    /// The default ATS uses when a key is absent or ignored (reference §1.1–§1.3).
    static func defaultDescription(_ key: ATSKey) -> String {
        switch key {
        case .allowsArbitraryLoads, .allowsArbitraryLoadsForMedia, .allowsArbitraryLoadsInWebContent,
            .includesSubdomains, .exceptionAllowsInsecureHTTPLoads, .requiresCertificateTransparency,
            .thirdPartyExceptionAllowsInsecureHTTPLoads, .temporaryExceptionAllowsInsecureHTTPLoads,
            .temporaryThirdPartyExceptionAllowsInsecureHTTPLoads:
            "NO"
        case .exceptionRequiresForwardSecrecy, .thirdPartyExceptionRequiresForwardSecrecy,
            .temporaryExceptionRequiresForwardSecrecy, .temporaryThirdPartyExceptionRequiresForwardSecrecy:
            "YES"
        case .exceptionMinimumTLSVersion, .thirdPartyExceptionMinimumTLSVersion, .temporaryExceptionMinimumTLSVersion,
            .temporaryThirdPartyExceptionMinimumTLSVersion:
            "TLSv1.2"
        case .allowsLocalNetworking: "not set: local hosts exempt"
        case .exceptionDomains: "no exception domains"
        case .pinnedDomains: "no pins"
        case .pinnedCAIdentities, .pinnedLeafIdentities, .spkiSHA256Base64: "no pins"
        case .requiresNIAPTLSPackageVersion, .exceptionRequiresNIAPTLSPackageVersion: "not set"
        }
    }

    /// Checks `value`'s plist type against `key`'s; reports and returns false on a mismatch.
    mutating func checkType(_ key: ATSKey, _ value: PlistValue, _ path: [String]) -> Bool {
        let ok: Bool
        switch (key.valueType, value) {
        case (.boolean, .bool), (.string, .string), (.dictionary, .dictionary), (.array, .array): ok = true
        default: ok = false
        }
        if ok { return true }
        let shown = Self.show(value)
        if key.valueType == .boolean, let read = value.atsBoolValue {
            // Numbers are not ignored: Apple's open-source parser compares them with YES (src S1), and the policy
            // engine does the same. That is a reading of the source, not documented behaviour (README, "Choices
            // where Apple's behaviour is unconfirmed"), so 0 and 1 are a warning: they work here, but fragilely.
            // Any other number is read as NO, which is rarely what its author meant: an error.
            let plain = value == .integer(0) || value == .integer(1) || value == .real(0) || value == .real(1)
            add(
                .wrongType, path,
                "\(key.rawValue) is \(article(value.typeName)) \(value.typeName)\(shown), not a Boolean: ATSProxy "
                    + "reads it as \(read ? "YES" : "NO"), as Apple's open-source parser does (1 = YES, any other "
                    + "number = NO); that iOS itself always does so is unconfirmed",
                fix: Self.typeFix(key, value), severity: plain ? .warning : .error)
            return true
        }
        var message =
            "\(key.rawValue) is \(article(value.typeName)) \(value.typeName)\(shown), not "
            + "\(article(key.valueType.rawValue)) \(key.valueType.rawValue): ATS ignores it"
        switch key.valueType {
        case .boolean, .string:
            message += " and uses the default (\(Self.defaultDescription(key)))"
        case .dictionary, .array:
            message += " and everything in it"
        }
        add(.wrongType, path, message, fix: Self.typeFix(key, value))
        return false
    }

    /// ` ("YES")` for scalars, empty for containers.
    static func show(_ value: PlistValue) -> String {
        switch value {
        case .string(let s): " (\"\(s)\")"
        case .integer(let i): " (\(i))"
        case .real(let r): " (\(r))"
        case .bool(let b): b ? " (YES)" : " (NO)"
        default: ""
        }
    }

    static func typeFix(_ key: ATSKey, _ value: PlistValue) -> String {
        switch key.valueType {
        case .boolean:
            let truthy: Bool?
            switch value {
            case .string(let s):
                truthy =
                    ["yes", "true", "1"].contains(s.lowercased())
                    ? true
                    : ["no", "false", "0"].contains(s.lowercased()) ? false : nil
            case .integer(let i): truthy = i != 0
            case .real(let r): truthy = r != 0
            default: truthy = nil
            }
            switch truthy {
            case true?: return "write <true/> for \(key.rawValue) (a real boolean, not \(value.typeName.lowercased()))"
            case false?:
                return defaultDescription(key) == "NO"
                    ? "write <false/> for \(key.rawValue), or remove the key (NO is its default)"
                    : "write <false/> for \(key.rawValue)"
            case nil: return "write <true/> or <false/> for \(key.rawValue)"
            }
        case .string:
            if key == .exceptionMinimumTLSVersion {
                return "write a <string> such as <string>TLSv1.2</string> for \(key.rawValue)"
            }
            return "write a <string> value for \(key.rawValue)"
        case .dictionary: return "make \(key.rawValue) a <dict>"
        case .array: return "make \(key.rawValue) an <array> of <dict>s each holding SPKI-SHA256-BASE64"
        }
    }

    func article(_ word: String) -> String { word.first.map { "AEIOU".contains($0) } == true ? "an" : "a" }

    /// Reports a key that `ATSKey` knows but that does not belong at `level`.
    mutating func misplaced(_ key: ATSKey, at level: ATSKey.Level, _ path: [String]) {
        let home = key.levels.map(Self.placeName).joined(separator: " or ")
        var message = "\(key.rawValue) belongs \(home), not \(Self.placeName(level)); ATS ignores it here"
        var fix = "move \(key.rawValue) \(home)"
        if key == .allowsArbitraryLoads && level == .exceptionDomain {
            message += " (the per-host key for plain HTTP is NSExceptionAllowsInsecureHTTPLoads)"
            fix = "to allow plain HTTP for this host, use NSExceptionAllowsInsecureHTTPLoads here instead"
        }
        add(.misplacedKey, path, message, fix: fix)
    }

    /// Reports a key `ATSKey` does not know, with a did-you-mean by edit distance over every ATS key.
    mutating func unknownKey(_ key: String, at level: ATSKey.Level, _ path: [String]) {
        if key == "NSExceptionAllowsLocalNetworking" {
            add(
                .unknownKey, path,
                "NSExceptionAllowsLocalNetworking is not an ATS key (it does not exist); ATS ignores it",
                fix: "remove it; to exempt local hosts use NSAllowsLocalNetworking at the top level, or "
                    + "NSExceptionAllowsInsecureHTTPLoads in this host's entry")
            return
        }
        if level == .topLevel, key.contains("."), !key.hasPrefix("NS") {
            add(
                .unknownKey, path,
                "\(key) looks like a host name, but exception domains go inside NSExceptionDomains; ATS ignores "
                    + "it here",
                fix: "move the \(key) entry into the NSExceptionDomains dictionary")
            return
        }
        guard let suggestion = Self.closestKey(to: key, preferring: level) else {
            add(
                .unknownKey, path, "\(key) is not an ATS key \(Self.placeName(level)); ATS ignores it",
                fix: "remove \(key), or replace it with the ATS key you meant")
            return
        }
        let caseOnly = suggestion.rawValue.lowercased() == key.lowercased()
        let why = caseOnly ? " (keys are case-sensitive)" : ""
        if suggestion.levels.contains(level) {
            add(
                .unknownKey, path,
                "\(key) is not an ATS key; ATS ignores it. Did you mean \(suggestion.rawValue)?\(why)",
                fix: "rename \(key) to \(suggestion.rawValue)")
        } else {
            let home = suggestion.levels.map(Self.placeName).joined(separator: " or ")
            add(
                .unknownKey, path,
                "\(key) is not an ATS key; ATS ignores it. Did you mean \(suggestion.rawValue)?\(why) That key "
                    + "belongs \(home)",
                fix: "rename \(key) to \(suggestion.rawValue) and move it \(home)")
        }
    }

    /// The ATS key nearest to `key` by case-insensitive edit distance, within a length-scaled threshold; ties go to
    /// keys valid at `level`.
    static func closestKey(to key: String, preferring level: ATSKey.Level) -> ATSKey? {
        let lowered = key.lowercased()
        let threshold = max(1, min(3, key.count / 6))
        var best: (key: ATSKey, distance: Int, preferred: Bool)?
        for candidate in ATSKey.allCases {
            let d = editDistance(lowered, candidate.rawValue.lowercased(), limit: threshold)
            guard d <= threshold else { continue }
            let preferred = candidate.levels.contains(level)
            if let b = best, b.distance < d || (b.distance == d && (b.preferred || !preferred)) { continue }
            best = (candidate, d, preferred)
        }
        return best?.key
    }

    /// Reports a key that exists but does nothing on the chosen profile (`ATSKey.introduced`).
    mutating func checkProfile(_ key: ATSKey, _ path: [String]) {
        guard key.introduced > profile else { return }
        var message = "\(key.rawValue) exists only from \(key.introduced); on \(profile) ATS ignores it"
        if key == .requiresNIAPTLSPackageVersion || key == .exceptionRequiresNIAPTLSPackageVersion {
            // Reference §1.1: first OS unconfirmed (SDK 26.5 adds the NIAP cipher group); ATSKey takes iOS 26.
            message += " (the first iOS version with NIAP mode is unconfirmed; taken as iOS 26)"
        }
        add(
            .keyUnavailableOnProfile, path, message,
            fix: "if the app supports \(profile), do not rely on \(key.rawValue) there; otherwise raise the "
                + "deployment target to \(key.introduced)")
    }
}
