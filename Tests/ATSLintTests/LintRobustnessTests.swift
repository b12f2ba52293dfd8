import ATSLint
import ATSPolicy
import Testing

/// Lint must accept any tree: random mixes of real keys, near-misses and junk, with random value types, on every
/// profile. Every finding must still carry a known rule, a rooted key path and a fix.
@Suite struct LintRobustnessTests {
    /// SplitMix64: a small deterministic generator so a failure reproduces.
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

    static let keys: [String] =
        ATSKey.allCases.map(\.rawValue) + [
            "example.com", "Example.com", "*.example.com", "example.com:443", "10.0.0.0/8", "10.0.0.0/99", "::1",
            "fe80::%lo0/10", "https://x.example/a", "", " ", "a.example.com.", "NSEExceptionDomains",
            "nsincludessubdomains",
            "NSExceptionAllowsLocalNetworking", "SPKI-SHA256-Base64", "x",
        ]

    static func randomValue(_ rng: inout SplitMix, depth: Int) -> PlistValue {
        let pick =
            depth == 0 ? 8 : depth > 4 ? Int.random(in: 0..<6, using: &rng) : Int.random(in: 0..<9, using: &rng)
        switch pick {
        case 0: return .bool(Bool.random(using: &rng))
        case 1: return .integer(Int.random(in: -2...2, using: &rng))
        case 2: return .real(0.5)
        case 3:
            return .string(
                ["YES", "TLSv1.0", "TLSv1.4", "1.2", String(repeating: "A", count: 43) + "=", "abc"].randomElement(
                    using: &rng) ?? "")
        case 4: return .data([1, 2, 3])
        case 5: return .date(0)
        case 6:
            return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
        default:
            var d = PlistDictionary()
            for _ in 0..<Int.random(in: 0...5, using: &rng) {
                d.set(keys.randomElement(using: &rng) ?? "x", randomValue(&rng, depth: depth + 1))
            }
            return .dictionary(d)
        }
    }

    @Test(arguments: IOSProfile.allCases)
    func randomTreesNeverCrash(profile: IOSProfile) {
        var rng = SplitMix(state: UInt64(profile.rawValue))
        var total = 0
        for _ in 0..<400 {
            let tree = Self.randomValue(&rng, depth: 0)
            let findings = lint(tree, profile: profile)
            total += findings.count
            for f in findings {
                #expect(LintRule(rawValue: f.ruleID) != nil)
                #expect(f.keyPath.first == "NSAppTransportSecurity")
                #expect(!f.fix.isEmpty)
            }
            #expect(lint(tree, profile: profile) == findings, "lint is deterministic")
        }
        #expect(total > 0)
    }
}
