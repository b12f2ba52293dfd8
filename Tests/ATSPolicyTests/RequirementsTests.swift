import ATSPolicy
import Testing

struct RequirementsTests {
    static let cipherRows: [(IOSProfile, Int, UInt16, Bool, Bool)] = [
        // profile, ATS group size, first suite, has ECDHE-RSA-AES256-CBC-SHA (0xC014), has CBC-SHA384 (0xC024)
        (.ios9, 11, 0xC02C, false, true), (.ios10, 11, 0xC02C, false, true), (.ios14, 17, 0x1301, true, true),
        (.ios17, 13, 0x1301, true, false), (.ios26, 13, 0x1301, true, false),
    ]

    @Test("§3.2: the exact ATS suites offered per profile", arguments: cipherRows)
    func atsSuites(profile: IOSProfile, count: Int, first: UInt16, hasC014: Bool, hasC024: Bool) throws {
        let r = try #require(req(policy(nil, profile), https("api.example.com")))
        let suites = try #require(r.offeredCipherSuites)
        #expect(suites.count == count)
        #expect(suites.first?.code == first)
        #expect(suites.contains { $0.code == 0xC014 } == hasC014)
        #expect(suites.contains { $0.code == 0xC024 } == hasC024)
        #expect(suites.allSatisfy { $0.isForwardSecret })
        #expect(r.requiresForwardSecrecy && r.atsEnforced)
    }

    @Test("§3.2: PFS off puts the compatibility group before the ATS group; with insecure HTTP no list at all")
    func compatibilityOrder() throws {
        let noPFS = policy(
            dict(["NSExceptionDomains": domains(["h.example": dict(["NSExceptionRequiresForwardSecrecy": no])])]),
            .ios17)
        let suites = try #require(req(noPFS, https("h.example"))?.offeredCipherSuites)
        #expect(suites.prefix(4).map(\.code) == [0x009D, 0x009C, 0x0035, 0x002F])
        #expect(suites.count == 17)
        let open = policy(
            dict([
                "NSExceptionDomains": domains([
                    "h.example": dict([
                        "NSExceptionRequiresForwardSecrecy": no, "NSExceptionAllowsInsecureHTTPLoads": yes,
                    ])
                ])
            ]), .ios17)
        #expect(try #require(req(open, https("h.example"))).offeredCipherSuites == nil)
    }

    static let versionRows: [(IOSProfile, [TLSVersion], [TLSVersion])] = [
        // profile, offered under full ATS, offered when ATS is off for the host
        (.ios9, [.tls12], [.tls10, .tls11, .tls12]),
        (.ios10, [.tls12], [.tls10, .tls11, .tls12]),
        (.ios14, [.tls12, .tls13], [.tls10, .tls11, .tls12, .tls13]),
        (.ios17, [.tls12, .tls13], [.tls10, .tls11, .tls12, .tls13]),
        (.ios26, [.tls12, .tls13], [.tls12, .tls13]),
    ]

    @Test("§3.1: offered TLS versions per profile", arguments: versionRows)
    func offeredVersions(profile: IOSProfile, ats: [TLSVersion], open: [TLSVersion]) throws {
        let p = policy(
            dict(["NSAllowsArbitraryLoads": yes, "NSExceptionDomains": domains(["strict.example": dict([:])])]), profile
        )
        #expect(try #require(req(p, https("strict.example"))).offeredVersions == ats)
        let o = try #require(req(p, https("open.example")))
        #expect(o.offeredVersions == open)
        #expect(!o.atsEnforced && o.offeredCipherSuites == nil && o.allowsCleartext)
    }

    @Test("TLSv1.3 as a minimum is unknown before iOS 14 (TLS 1.3 arrived in iOS 12.2)")
    func tls13OnOldProfiles() throws {
        let p = policy(
            dict(["NSExceptionDomains": domains(["h.example": dict(["NSExceptionMinimumTLSVersion": str("TLSv1.3")])])]
            ), .ios10)
        #expect(try #require(req(p, https("h.example"))).minimumTLSVersion == .tls12)
    }

    @Test("iOS 26 with a TLS 1.0 exception: the note says the OS refuses it")
    func ios26Note() throws {
        let r = try #require(req(policy(ConfigExample.lessSecure, .ios26), https("less-secure.example.com")))
        #expect(r.minimumTLSVersion == .tls10)
        #expect(r.offeredVersions == [.tls12, .tls13])
        #expect(r.decidedBy.notes.contains { $0.contains("iOS 26 refuses TLS 1.0/1.1") })
    }

    @Test("certificate rules follow the profile and ATS")
    func certificateRules() throws {
        let old = try #require(req(policy(dict(["NSAllowsArbitraryLoads": yes]), .ios9), https("a.example")))
        #expect(!old.certificateRules.requiresSHA2 && old.certificateRules.minimumRSABits == 0)
        let oldATS = try #require(req(policy(nil, .ios9), https("a.example")))
        #expect(oldATS.certificateRules.requiresSHA2 && oldATS.certificateRules.minimumRSABits == 2048)
        #expect(!oldATS.certificateRules.enforcesValidityLimits)
        let modern = try #require(req(policy(dict(["NSAllowsArbitraryLoads": yes]), .ios17), https("a.example")))
        #expect(modern.certificateRules.requiresSHA2 && modern.certificateRules.requiresServerAuthEKU)
    }
}

struct FixRenderingTests {
    @Test("a fix renders as a ready-to-paste XML plist snippet")
    func plistSnippet() {
        let fix = ExceptionFix.setKeys(
            domain: "less-secure.example.com",
            keys: [
                FixKey(key: "NSExceptionMinimumTLSVersion", value: str("TLSv1.0")),
                FixKey(key: "NSExceptionRequiresForwardSecrecy", value: no),
            ])
        #expect(
            fix.plistSnippet == """
                <key>NSExceptionDomains</key>
                <dict>
                    <key>less-secure.example.com</key>
                    <dict>
                        <key>NSExceptionMinimumTLSVersion</key>
                        <string>TLSv1.0</string>
                        <key>NSExceptionRequiresForwardSecrecy</key>
                        <false/>
                    </dict>
                </dict>
                """)
        #expect(
            fix.summary
                == "set in NSExceptionDomains › less-secure.example.com: NSExceptionMinimumTLSVersion = TLSv1.0; "
                + "NSExceptionRequiresForwardSecrecy = NO"
        )
        #expect(ExceptionFix.noExceptionCanHelp(reason: "x").plistSnippet == nil)
    }

    @Test("placed in an app's policy, a fix never repeats NSExceptionDomains or a domain entry the app has")
    func placedSnippet() {
        let fix = ExceptionFix.setKeys(
            domain: "old.example.com", keys: [FixKey(key: "NSExceptionMinimumTLSVersion", value: str("TLSv1.0"))])
        func policy(_ hosts: [String]) -> ATSPolicy {
            let entries = hosts.map { (key: $0, value: PlistValue.dictionary(PlistDictionary())) }
            return ATSPolicy(atsDictionary: .dictionary(PlistDictionary(
                entries.isEmpty ? [] : [(key: "NSExceptionDomains", value: .dictionary(PlistDictionary(entries)))])))
        }
        let none = fix.placedSnippet(in: policy([]))
        #expect(none?.pasteInside == "NSAppTransportSecurity")
        #expect(none?.snippet == fix.plistSnippet)
        let other = fix.placedSnippet(in: policy(["api.example.com"]))
        #expect(other?.pasteInside == "NSAppTransportSecurity › NSExceptionDomains")
        #expect(other?.snippet == """
            <key>old.example.com</key>
            <dict>
                <key>NSExceptionMinimumTLSVersion</key>
                <string>TLSv1.0</string>
            </dict>
            """)
        let same = fix.placedSnippet(in: policy(["old.example.com"]))
        #expect(same?.pasteInside.hasPrefix("NSAppTransportSecurity › NSExceptionDomains › old.example.com") ?? false)
        #expect(same?.snippet == "<key>NSExceptionMinimumTLSVersion</key>\n<string>TLSv1.0</string>")
        #expect(fix.placedSnippet(in: nil)?.snippet == fix.plistSnippet)
    }

    @Test("XML special characters are escaped")
    func escaping() {
        let fix = ExceptionFix.setKeys(domain: "a&b", keys: [FixKey(key: "K", value: str("<v>"))])
        #expect(fix.plistSnippet?.contains("<key>a&amp;b</key>") == true)
        #expect(fix.plistSnippet?.contains("<string>&lt;v&gt;</string>") == true)
    }
}

struct MintedLeafTests {
    @Test("a well-formed minted leaf passes")
    func good() {
        #expect(ATSPolicy.appleRuleViolations(leaf: cert(lifetimeDays: 397), host: "api.example.com", now: now).isEmpty)
        #expect(
            ATSPolicy.appleRuleViolations(
                leaf: cert(keyType: .ec, bits: 256, dnsNames: ["*.example.com"]), host: "api.example.com", now: now
            ).isEmpty)
        #expect(
            ATSPolicy.appleRuleViolations(leaf: cert(dnsNames: [], ips: ["127.0.0.1"]), host: "127.0.0.1", now: now)
                .isEmpty)
    }

    static let badLeaves: [(String, CertificateFacts, String, ViolationKind)] = [
        ("no SAN", cert(dnsNames: []), "api.example.com", .hostnameMismatch),
        ("SAN for another host", cert(host: "other.example.com"), "api.example.com", .hostnameMismatch),
        ("wildcard covers one label only", cert(dnsNames: ["*.example.com"]), "a.b.example.com", .hostnameMismatch),
        ("no serverAuth", cert(ekus: ["1.3.6.1.5.5.7.3.2"]), "api.example.com", .missingServerAuthEKU),
        ("no EKU at all", cert(ekus: nil), "api.example.com", .missingServerAuthEKU),
        ("over 398 days", cert(lifetimeDays: 400), "api.example.com", .validityTooLong),
        ("over 825 days", cert(lifetimeDays: 900), "api.example.com", .validityTooLong),
        ("RSA-1024", cert(bits: 1024), "api.example.com", .weakKey),
        ("P-192", cert(keyType: .ec, bits: 192), "api.example.com", .weakKey),
        ("SHA-1", cert(hash: .sha1), "api.example.com", .weakSignatureHash),
        ("expired", cert(notBefore: now.addingTimeInterval(-100 * day), lifetimeDays: 90), "api.example.com", .expired),
        ("not yet valid", cert(notBefore: now.addingTimeInterval(day)), "api.example.com", .notYetValid),
    ]

    @Test("§3.3 minted-leaf rules: each defect is reported", arguments: badLeaves)
    func bad(name: String, leaf: CertificateFacts, host: String, kind: ViolationKind) {
        let vs = ATSPolicy.appleRuleViolations(leaf: leaf, host: host, now: now)
        #expect(vs.map(\.kind) == [kind], "\(name)")
        #expect(vs.allSatisfy { $0.fix.isNoExceptionCanHelp })
    }
}
