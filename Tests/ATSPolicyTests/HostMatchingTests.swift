import ATSPolicy
import Testing

struct HostMatchingTests {
    /// Apple's worked example (reference §2.2, src S4 `testIncludesSubdomains`).
    static let workedExample = dict([
        "NSExceptionDomains": domains([
            "example.com": dict(["NSExceptionAllowsInsecureHTTPLoads": yes, "NSIncludesSubdomains": yes]),
            "subhostname.example.com": dict([
                "NSIncludesSubdomains": no, "NSExceptionMinimumTLSVersion": str("TLSv1.3"),
            ]),
            "another.subhostname.example.com": dict(["NSExceptionMinimumTLSVersion": str("TLSv1.1")]),
        ])
    ])

    static let workedRows: [(String, String, Bool)] = [
        ("subhostname.example.com", "subhostname.example.com", true),
        ("another.subhostname.example.com", "another.subhostname.example.com", true),
        ("test.another.subhostname.example.com", "example.com", false),
        ("deep.a.b.example.com", "example.com", false),
        ("example.com", "example.com", false),
    ]

    @Test("§2.2 worked example: most specific applicable entry wins", arguments: workedRows)
    func workedExample(host: String, entry: String, tlsRequired: Bool) throws {
        let p = policy(Self.workedExample, .ios17)
        let m = try #require(p.exceptionMatch(for: host))
        #expect(m.entry.key == entry)
        #expect(cleartextBlocked(p, host) == tlsRequired)
    }

    @Test("§2.2: passed-over entries are named in the reason")
    func passedOverReason() throws {
        let p = policy(Self.workedExample, .ios17)
        let m = try #require(p.exceptionMatch(for: "test.another.subhostname.example.com"))
        #expect(m.passedOver == ["another.subhostname.example.com", "subhostname.example.com"])
        #expect(
            try #require(req(p, https("test.another.subhostname.example.com"))).decidedBy.reason.contains("passed over")
        )
    }

    static let exactness: [(String, String, Bool)] = [
        ("example.com", "example.com", true),
        ("EXAMPLE.COM", "example.com", false),  // keys must be lowercase (§2.2)
        ("example.com.", "example.com", false),  // trailing dot significant
        ("example.com.", "example.com.", true),
        ("example.com", "example.com.", false),
        ("example.com:443", "example.com", false),
        ("*.example.com", "a.example.com", false),  // no wildcards
    ]

    @Test("§2.2: lookup is by exact string (case, trailing dot, port)", arguments: exactness)
    func exactLookup(key: String, host: String, matches: Bool) {
        let p = policy(
            dict(["NSExceptionDomains": domains([key: dict(["NSExceptionAllowsInsecureHTTPLoads": yes])])]), .ios17)
        #expect((p.exceptionMatch(for: host)?.entry.key == key) == matches)
    }

    @Test("§2.2: a name entry never applies to an IP literal, nor an IP entry to a name")
    func namesAndAddressesDoNotMix() {
        let p = policy(
            dict([
                "NSExceptionDomains": domains([
                    "1.2.3.4.example": dict([:]), "203.0.113.5": dict(["NSExceptionAllowsInsecureHTTPLoads": yes]),
                    "example": dict(["NSIncludesSubdomains": yes]),
                ])
            ]), .ios17)
        #expect(p.exceptionMatch(for: "203.0.113.5")?.entry.key == "203.0.113.5")
        #expect(p.exceptionMatch(for: "203.0.113.6") == nil)  // "example"-style parent stripping never runs on IPs
        #expect(p.exceptionMatch(for: "x.203.0.113.5") == nil)
    }

    static let cidrRows: [(String, String?)] = [
        ("10.1.2.3", "10.1.0.0/16"), ("10.2.0.1", "10/8"), ("10.1.2.200", "10.1.2.128/25"), ("11.0.0.1", nil),
        ("2001:db8:12::34", "2001:db8:12::/48"), ("2001:db8:99::1", "2001:db8::/32"), ("192.168.7.7", "192.168.7.7"),
        ("::ffff:10.0.0.1", nil),
    ]

    @Test("§2.3: exact IP key, then longest CIDR prefix of the same family (iOS 17+)", arguments: cidrRows)
    func cidrLongestPrefix(host: String, expected: String?) {
        let p = policy(
            dict([
                "NSExceptionDomains": domains([
                    "10/8": dict([:]), "10.1.0.0/16": dict([:]), "10.1.2.128/25": dict([:]), "2001:db8::/32": dict([:]),
                    "2001:db8:12::/48": dict([:]), "192.168.7.7": dict([:]), "192.168.0.0/16": dict([:]),
                    "bad/99": dict([:]),
                ])
            ]), .ios17)
        #expect(p.exceptionMatch(for: host)?.entry.key == expected)
    }

    @Test("§2.3: IP and CIDR keys do nothing before iOS 17", arguments: [IOSProfile.ios9, .ios10, .ios14])
    func ipKeysBeforeIOS17(profile: IOSProfile) {
        let p = policy(
            dict(["NSExceptionDomains": domains(["203.0.113.0/24": dict([:]), "203.0.113.9": dict([:])])]), profile)
        #expect(p.exceptionMatch(for: "203.0.113.9") == nil)
        #expect(p.diagnostics.filter { $0.problem.contains("only from iOS 17") }.count == 2)
    }

    static let cidrParsing: [(String, String?)] = [
        ("10/8", "10.0.0.0/8"), ("172.16/12", "172.16.0.0/12"), ("2001:db8:12::/48", "2001:db8:12:0:0:0:0:0/48"),
        ("10.0.0.0/33", nil), ("2001:db8::/129", nil), ("10.0.0./8", nil), ("fe80::%lo0/10", nil), ("10/", nil),
        ("/8", nil), ("1.2.3.4.5/8", nil),
    ]

    @Test("§2.3: CIDR parsing as Apple's cidr_string_to_subnet_and_mask", arguments: cidrParsing)
    func cidrParse(key: String, expected: String?) {
        #expect(CIDRRange(key: key)?.description == expected)
    }

    static let pinRows: [(String, String?)] = [
        ("example.com", "example.com"), ("a.example.com", "example.com"), ("b.a.example.com", nil),
        ("A.EXAMPLE.COM.", "example.com"), ("other.com", nil), ("exact.test", "exact.test"), ("x.exact.test", nil),
    ]

    @Test("§1.3: pinned domains match case-insensitively, one label below a parent (Apple's quirk)", arguments: pinRows)
    func pinnedMatching(host: String, expected: String?) {
        let id = dict(["SPKI-SHA256-BASE64": str("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")])
        let p = policy(
            dict([
                "NSPinnedDomains": dict([
                    "example.com": dict(["NSIncludesSubdomains": yes, "NSPinnedCAIdentities": .array([id])]),
                    "exact.test": dict(["NSPinnedLeafIdentities": .array([id])]),
                ])
            ]), .ios17)
        #expect(p.pinSet(for: host)?.domain == expected)
        #expect(
            policy(
                dict(["NSPinnedDomains": dict(["example.com": dict(["NSPinnedCAIdentities": .array([id])])])]), .ios10
            )
            .pinSet(for: "example.com") == nil)
    }

    @Test("§2.1 row 9: built-in exceptions and their replacement by an app entry")
    func builtIns() throws {
        let p = policy(nil, .ios17)
        let maps = try #require(req(p, https("gs.apple.com")))
        #expect(maps.minimumTLSVersion == .tls10)
        #expect(maps.decidedBy.reason.contains("built-in"))
        #expect(maps.offeredCipherSuites == nil)  // insecure HTTP allowed + no PFS: stack default list (src S1)
        let off = policy(nil, .ios17, options: PolicyOptions(builtInExceptions: false))
        #expect(off.exceptionMatch(for: "gs.apple.com") == nil)
        let replaced = policy(dict(["NSExceptionDomains": domains(["gs.apple.com": dict([:])])]), .ios17)
        #expect(replaced.exceptionMatch(for: "gs.apple.com")?.entry.origin == .app)
        #expect(replaced.exceptionMatch(for: "x.gs.apple.com")?.entry.key == "apple.com")
    }

    static let addresses: [(String, String?)] = [
        ("127.0.0.1", "127.0.0.1"), ("::1", "0:0:0:0:0:0:0:1"), ("2001:db8::1", "2001:db8:0:0:0:0:0:1"),
        ("::ffff:1.2.3.4", "0:0:0:0:0:ffff:102:304"), ("fe80::1%en0", "fe80:0:0:0:0:0:0:1"), ("01.2.3.4", nil),
        ("256.1.1.1", nil), ("1.2.3", nil), ("1::2::3", nil), ("example.com", nil), ("12345::", nil),
        // Hex letters are fine where there is a colon; names (letters, no colon) and other digits are not literals.
        ("a::1", "a:0:0:0:0:0:0:1"), ("1.2.3.4.example", nil), ("1.2.3.4a", nil), ("\u{661}.2.3.4", nil),
        ("fe80::1%zone.with.dots", "fe80:0:0:0:0:0:0:1"), ("", nil),
    ]

    @Test("IP literal parsing", arguments: addresses)
    func parseAddress(text: String, expected: String?) {
        #expect(IPAddress(text)?.description == expected)
    }
}
