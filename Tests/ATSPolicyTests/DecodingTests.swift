import ATSPolicy
import Testing

struct DecodingTests {
    @Test("§1.2 type strictness: a String where a Boolean belongs is ignored, default applies, diagnostic recorded")
    func stringBoolIgnored() throws {
        let p = policy(
            dict([
                "NSAllowsArbitraryLoads": str("YES"),
                "NSExceptionDomains": domains([
                    "a.example.com": dict([
                        "NSExceptionAllowsInsecureHTTPLoads": str("true"), "NSIncludesSubdomains": yes,
                    ])
                ]),
            ]))
        #expect(p.allowsArbitraryLoads == nil)
        let entry = try #require(p.exceptionDomains.first { $0.key == "a.example.com" })
        #expect(!entry.allowsInsecureHTTPLoads)
        #expect(entry.includesSubdomains)
        let errors = p.diagnostics.filter { $0.severity == .error }
        #expect(errors.map(\.keyPath.last) == ["NSAllowsArbitraryLoads", "NSExceptionAllowsInsecureHTTPLoads"])
        #expect(errors[0].problem.contains("must be a Boolean"))
        #expect(
            errors[1].keyPathString
                == "NSAppTransportSecurity › NSExceptionDomains › a.example.com › NSExceptionAllowsInsecureHTTPLoads")
    }

    @Test("§1.2 src S1: a number is an NSNumber, accepted (1 = YES) with a warning")
    func integerBool() {
        let p = policy(dict(["NSAllowsArbitraryLoads": .integer(1)]))
        #expect(p.allowsArbitraryLoads == true)
        #expect(p.diagnostics.contains { $0.severity == .warning && $0.keyPath.last == "NSAllowsArbitraryLoads" })
    }

    static let tlsStrings: [(String, TLSVersion?)] = [
        ("TLSv1.0", .tls10), ("TLSv1.1", .tls11), ("TLSv1.2", .tls12), ("TLSv1.3", .tls13), ("TLSv1.4", nil),
        ("TLSV1.3", nil), ("TLSv1.00", nil), ("1.2", nil), ("tlsv1.2", nil), ("DTLSv1.2", nil), ("", nil),
    ]

    @Test("§1.2 src S4: NSExceptionMinimumTLSVersion accepts only the exact spellings", arguments: tlsStrings)
    func minimumTLSStrings(text: String, expected: TLSVersion?) throws {
        let p = policy(
            dict(["NSExceptionDomains": domains(["h.example": dict(["NSExceptionMinimumTLSVersion": str(text)])])]),
            .ios17)
        let entry = try #require(p.exceptionDomains.first { $0.key == "h.example" })
        #expect(entry.minimumTLSVersion == expected)
        #expect(try #require(req(p, https("h.example"))).minimumTLSVersion == (expected ?? .tls12))
        #expect(p.diagnostics.contains { $0.severity == .error } == (expected == nil))
    }

    @Test("§1.2: a non-String minimum TLS version is ignored")
    func minimumTLSWrongType() throws {
        let p = policy(
            dict(["NSExceptionDomains": domains(["h.example": dict(["NSExceptionMinimumTLSVersion": .real(1.0)])])]))
        #expect(try #require(req(p, https("h.example"))).minimumTLSVersion == .tls12)
        #expect(p.diagnostics.contains { $0.severity == .error && $0.problem.contains("must be a String") })
    }

    @Test("§1.2: a non-dictionary exception entry is skipped")
    func nonDictionaryEntry() {
        let p = policy(dict(["NSExceptionDomains": domains(["h.example": yes])]), .ios17)
        #expect(!p.exceptionDomains.contains { $0.key == "h.example" })
        #expect(p.diagnostics.contains { $0.keyPath.last == "h.example" && $0.severity == .error })
    }

    @Test("NSAppTransportSecurity that is not a dictionary ⇒ full ATS with an error")
    func rootNotDictionary() {
        let p = policy(str("off"))
        #expect(cleartextBlocked(p, "example.com"))
        #expect(p.diagnostics.first?.severity == .error)
    }

    static let legacyCases: [(LegacyKeyReading, IOSProfile, Bool)] = [
        (.byProfile, .ios9, true), (.byProfile, .ios10, true), (.byProfile, .ios14, false), (.byProfile, .ios26, false),
        (.always, .ios26, true), (.never, .ios9, false),
    ]

    @Test("§1.2 legacy NSThirdParty*/NSTemporary* keys follow the chosen reading", arguments: legacyCases)
    func legacyKeys(reading: LegacyKeyReading, profile: IOSProfile, honoured: Bool) {
        let ats = dict([
            "NSExceptionDomains": domains([
                "old.example.com": dict(["NSTemporaryExceptionAllowsInsecureHTTPLoads": yes]),
                "third.example.com": dict(["NSThirdPartyExceptionMinimumTLSVersion": str("TLSv1.0")]),
            ])
        ])
        let p = policy(ats, profile, options: PolicyOptions(legacyKeys: reading))
        #expect(cleartextBlocked(p, "old.example.com") == !honoured)
        #expect(req(p, https("third.example.com"))?.minimumTLSVersion == (honoured ? .tls10 : .tls12))
        let notes = req(p, https("third.example.com"))?.decidedBy.notes ?? []
        #expect(notes.contains { $0.contains("Legacy keys") } == honoured)
    }

    @Test("an NSException* key beats its legacy spelling on the same entry")
    func currentKeyWins() throws {
        let p = policy(
            dict([
                "NSExceptionDomains": domains([
                    "h.example": dict([
                        "NSThirdPartyExceptionMinimumTLSVersion": str("TLSv1.0"),
                        "NSExceptionMinimumTLSVersion": str("TLSv1.1"),
                    ])
                ])
            ]), .ios9)
        #expect(try #require(req(p, https("h.example"))).minimumTLSVersion == .tls11)
    }

    @Test("keys the profile predates are ignored with an info diagnostic (iOS 9: NSAllowsLocalNetworking)")
    func keyNotOnProfile() {
        let p = policy(dict(["NSAllowsLocalNetworking": yes]), .ios9)
        #expect(p.allowsLocalNetworking == nil)
        #expect(p.diagnostics.contains { $0.severity == .info && $0.keyPath.last == "NSAllowsLocalNetworking" })
    }

    static let keyMistakeRows: [(String, String)] = [
        ("API.example.com", "uppercase"), ("*.example.com", "wildcards"), ("example.com:443", "port"),
        ("10.0.0.0/33", "CIDR"),
    ]

    @Test("§2.2/§2.3 key spelling mistakes are diagnosed", arguments: keyMistakeRows)
    func keyMistakes(key: String, word: String) {
        let p = policy(dict(["NSExceptionDomains": domains([key: dict([:])])]), .ios17)
        #expect(p.diagnostics.contains { $0.keyPath.last == key && $0.problem.contains(word) })
    }

    @Test("unknown keys and the non-key NSExceptionAllowsLocalNetworking are reported")
    func unknownKeys() {
        let p = policy(
            dict([
                "NSAllowArbitraryLoads": yes,
                "NSExceptionDomains": domains(["h.example": dict(["NSExceptionAllowsLocalNetworking": yes])]),
            ]))
        #expect(p.diagnostics.contains { $0.keyPath.last == "NSAllowArbitraryLoads" && $0.problem.contains("unknown") })
        #expect(p.diagnostics.contains { $0.problem.contains("not a real key") })
    }

    @Test("§1.3: pinned domains need an identity array; values are checked")
    func pinnedDecoding() {
        let good = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        let p = policy(
            dict([
                "NSPinnedDomains": dict([
                    "Pinned.Example.com": dict([
                        "NSPinnedLeafIdentities": .array([dict(["SPKI-SHA256-BASE64": str(good)])])
                    ]),
                    "empty.example.com": dict(["NSIncludesSubdomains": yes]),
                    "bad.example.com": dict([
                        "NSPinnedCAIdentities": .array([dict(["SPKI-SHA256-BASE64": str("nope")])])
                    ]),
                ])
            ]), .ios17)
        #expect(p.pinnedDomains.map(\.domain) == ["pinned.example.com", "bad.example.com"])
        #expect(p.diagnostics.contains { $0.keyPath.last == "empty.example.com" && $0.severity == .error })
        #expect(p.diagnostics.contains { $0.keyPath.last == "SPKI-SHA256-BASE64" && $0.severity == .warning })
        #expect(policy(dict(["NSPinnedDomains": dict([:])]), .ios10).diagnostics.contains { $0.severity == .info })
    }

    @Test("§1.1/§1.2 NIAP keys are read but flagged as not simulated")
    func niap() {
        let p = policy(
            dict([
                "NSRequiresNIAPTLSPackageVersion": str("2.1"),
                "NSExceptionDomains": domains([
                    "h.example": dict(["NSExceptionRequiresNIAPTLSPackageVersion": str("2.1")])
                ]),
            ]), .ios26)
        #expect(p.requiresNIAPTLSPackageVersion == "2.1")
        #expect(p.diagnostics.filter { $0.problem.contains("NIAP") }.count == 2)
    }
}
