import ATSPolicy

/// The top level of `NSAppTransportSecurity` and the global keys' interplay (reference §1.1, §2.1 rule 7).
extension Linter {
    /// The global keys whose mere presence silences NSAllowsArbitraryLoads from iOS 10 (reference §2.1 rule 7).
    static let silencingKeys: [ATSKey] = [
        .allowsArbitraryLoadsInWebContent, .allowsArbitraryLoadsForMedia, .allowsLocalNetworking,
    ]

    mutating func lintRoot(_ ats: PlistValue) {
        let base = [Self.root]
        guard case .dictionary(let root) = ats else {
            add(
                .atsNotDictionary, base,
                "NSAppTransportSecurity is \(article(ats.typeName)) \(ats.typeName)\(Self.show(ats)), not a "
                    + "Dictionary; ATS cannot read it, so full ATS defaults apply",
                fix: "make NSAppTransportSecurity a <dict> holding the ATS keys")
            return
        }

        var typed: [ATSKey: PlistValue] = [:]
        for (key, value) in root {
            let path = base + [key]
            guard let k = ATSKey(rawValue: key) else {
                unknownKey(key, at: .topLevel, path)
                continue
            }
            guard k.levels.contains(.topLevel) else {
                misplaced(k, at: .topLevel, path)
                continue
            }
            checkProfile(k, path)
            if checkType(k, value, path) { typed[k] = value }
        }

        let arbitraryLoads = typed[.allowsArbitraryLoads]?.boolValue == true
        // Present with any value — YES, NO or even a wrong type — counts (src S1: "if any of the other global keys
        // are set"); a wrongly typed one is already reported above.
        let silencers = Self.silencingKeys.filter { root[$0.rawValue] != nil }.map(\.rawValue)
        let arbitraryPath = base + [ATSKey.allowsArbitraryLoads.rawValue]
        if arbitraryLoads {
            if silencers.isEmpty {
                add(
                    .arbitraryLoads, arbitraryPath,
                    "NSAllowsArbitraryLoads = YES turns ATS off for every host not listed in NSExceptionDomains "
                        + "(plain HTTP allowed, no TLS version or cipher requirements); App Review asks for a "
                        + "justification",
                    fix: "remove NSAllowsArbitraryLoads and add NSExceptionDomains entries for the hosts that need "
                        + "relaxing")
            } else if profile >= .ios10 {
                add(
                    .arbitraryLoadsIgnored, arbitraryPath,
                    "NSAllowsArbitraryLoads = YES is ignored on iOS 10 and later because "
                        + "\(silencers.joined(separator: ", ")) \(silencers.count == 1 ? "is" : "are") present (even "
                        + "a NO value silences it): ATS stays on for every host without an exception",
                    fix: "to keep ATS on, remove NSAllowsArbitraryLoads; to really turn it off, remove "
                        + silencers.joined(separator: " and ")
                        + " (or list the hosts in NSExceptionDomains with NSExceptionAllowsInsecureHTTPLoads)")
            } else {
                add(
                    .arbitraryLoadsIgnored, arbitraryPath,
                    "NSAllowsArbitraryLoads = YES is honoured on iOS 9, but from iOS 10 it is ignored because "
                        + "\(silencers.joined(separator: ", ")) \(silencers.count == 1 ? "is" : "are") present",
                    fix: "decide which behaviour you want on iOS 10+ and remove either NSAllowsArbitraryLoads or "
                        + silencers.joined(separator: " and "),
                    severity: .warning)
            }
        }
        for key in [ATSKey.allowsArbitraryLoadsInWebContent, .allowsArbitraryLoadsForMedia]
        where typed[key]?.boolValue == true && profile >= key.introduced {
            let scope = key == .allowsArbitraryLoadsInWebContent ? "WKWebView content" : "AVFoundation media"
            add(
                .webOrMediaOnly, base + [key.rawValue],
                "\(key.rawValue) = YES relaxes ATS for \(scope) only; URLSession loads from the app itself still "
                    + "need HTTPS",
                fix: "for URLSession hosts that need plain HTTP, add NSExceptionDomains entries with "
                    + "NSExceptionAllowsInsecureHTTPLoads")
        }

        // ATS consults the global keys only on iOS 9 if a silencer is present (reference §2.1 rule 7).
        let effectiveArbitrary = arbitraryLoads && (silencers.isEmpty || profile < .ios10)
        let webOrMedia = [ATSKey.allowsArbitraryLoadsInWebContent, .allowsArbitraryLoadsForMedia]
            .contains { typed[$0]?.boolValue == true }
        if case .dictionary(let domains)? = typed[.exceptionDomains] {
            lintExceptionDomains(
                domains, base + [ATSKey.exceptionDomains.rawValue], arbitraryLoads: effectiveArbitrary,
                globallyRelaxed: effectiveArbitrary || webOrMedia)
        }
        if case .dictionary(let pins)? = typed[.pinnedDomains] {
            lintPinnedDomains(pins, base + [ATSKey.pinnedDomains.rawValue])
        }
    }
}
