import ATSPolicy
import Testing

/// A small deterministic generator (SplitMix64), so failures reproduce.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random ATS-shaped plists: real keys with values of random (often wrong) types, hosts of every kind.
struct PolicyGenerator {
    var rng: SplitMix
    static let hosts = [
        "example.com", "api.example.com", "a.b.example.com", "EXAMPLE.com", "example.com.", "printer.local", "intranet",
        "10.0.0.1", "10/8", "2001:db8::/32", "::1", "bad/99", "*.example.com", "", "apple.com",
    ]
    static let tlsStrings = ["TLSv1.0", "TLSv1.1", "TLSv1.2", "TLSv1.3", "TLSv9", "", "DTLSv1.2"]

    mutating func value(depth: Int) -> PlistValue {
        switch Int.random(in: 0..<8, using: &rng) {
        case 0, 1: return .bool(Bool.random(using: &rng))
        case 2: return .integer(Int.random(in: -1...2, using: &rng))
        case 3: return .string(Self.tlsStrings.randomElement(using: &rng) ?? "")
        case 4: return .real(1)
        case 5: return .data([1, 2])
        case 6 where depth > 0:
            return .array((0..<Int.random(in: 0...2, using: &rng)).map { _ in value(depth: depth - 1) })
        default: return depth > 0 ? entry(depth: depth - 1) : .bool(true)
        }
    }

    mutating func entry(depth: Int) -> PlistValue {
        var d = PlistDictionary()
        for _ in 0..<Int.random(in: 0...4, using: &rng) {
            let key = ATSKey.allCases.randomElement(using: &rng)?.rawValue ?? "NSIncludesSubdomains"
            d.set(key, value(depth: depth))
        }
        return .dictionary(d)
    }

    mutating func policy() -> PlistValue {
        var root = PlistDictionary()
        for key in [ATSKey.allowsArbitraryLoads, .allowsLocalNetworking, .allowsArbitraryLoadsInWebContent]
        where Bool.random(using: &rng) {
            root.set(key.rawValue, value(depth: 0))
        }
        var domains = PlistDictionary()
        for _ in 0..<Int.random(in: 0...5, using: &rng) {
            domains.set(
                Self.hosts.randomElement(using: &rng) ?? "x",
                Bool.random(using: &rng) ? entry(depth: 2) : value(depth: 1))
        }
        root.set(
            "NSExceptionDomains", Int.random(in: 0..<10, using: &rng) == 0 ? .string("oops") : .dictionary(domains))
        var pins = PlistDictionary()
        let identity = PlistValue.dictionary(
            PlistDictionary([("SPKI-SHA256-BASE64", .string("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="))]))
        pins.set(
            "example.com",
            .dictionary(
                PlistDictionary([
                    ("NSIncludesSubdomains", value(depth: 0)),
                    ("NSPinnedCAIdentities", Bool.random(using: &rng) ? .array([identity]) : value(depth: 1)),
                ])))
        root.set("NSPinnedDomains", .dictionary(pins))
        return .dictionary(root)
    }
}

struct RandomPolicyTests {
    @Test("random and malformed policies never crash and keep the invariants", arguments: IOSProfile.allCases)
    func invariants(profile: IOSProfile) {
        var gen = PolicyGenerator(rng: SplitMix(state: UInt64(profile.rawValue)))
        let hosts = [
            "example.com", "api.example.com", "x.a.b.example.com", "printer.local", "10.0.0.1", "::1",
            "203.0.113.9", "www.apple.com", "EXAMPLE.com", "example.com.",
        ]
        for _ in 0..<300 {
            let p = ATSPolicy(atsDictionary: gen.policy(), options: PolicyOptions(profile: profile))
            #expect(p.diagnostics.allSatisfy { $0.keyPath.first == "NSAppTransportSecurity" })
            for host in hosts {
                guard let r = p.requirements(for: https(host)).requirements else {
                    Issue.record("https://\(host) must never be refused before connecting")
                    continue
                }
                #expect(r.offeredVersions.allSatisfy { profile.stackVersions.contains($0) })
                #expect(!r.offeredVersions.isEmpty)
                #expect(r.offeredVersions.allSatisfy { $0 >= r.minimumTLSVersion })
                #expect(!r.requiresForwardSecrecy || r.offeredCipherSuites?.allSatisfy { $0.isForwardSecret } == true)
                switch p.requirements(for: http(host)) {
                case .blocked(let v):
                    #expect(v.urlError.code == -1022 && v.sslError == nil)
                    #expect(!r.allowsCleartext)
                case .proceed(let c):
                    #expect(c.allowsCleartext && r.allowsCleartext)
                }
                let verdict = p.evaluate(handshake(version: .tls12, suite: 0xC02F), against: r)
                #expect(verdict.violations.allSatisfy { !$0.explanation.isEmpty })
            }
        }
    }
}
