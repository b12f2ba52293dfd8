import ATSPolicy
import Testing

/// Applying a suggested fix to the policy must make the same connection pass: the fix is not only narrow but
/// sufficient.
extension PlistValue {
    /// This ATS dictionary with `fix` applied (the entry for its domain created or replaced).
    func applying(_ fix: ExceptionFix) -> PlistValue? {
        guard case .setKeys(let domain, let keys) = fix else { return nil }
        var root = dictionaryValue ?? PlistDictionary()
        var exceptions = root["NSExceptionDomains"]?.dictionaryValue ?? PlistDictionary()
        var entry = PlistDictionary()
        for k in keys { entry.set(k.key, k.value) }
        exceptions.set(domain, .dictionary(entry))
        root.set("NSExceptionDomains", .dictionary(exceptions))
        return .dictionary(root)
    }
}

struct FixScenario: CustomTestStringConvertible, Sendable {
    let name: String
    let ats: PlistValue
    let profile: IOSProfile
    let host: String
    let facts: HandshakeFacts
    var testDescription: String { "\(name) on \(profile)" }
}

let parentPolicy = dict([
    "NSExceptionDomains": domains([
        "example.com": dict(["NSIncludesSubdomains": yes, "NSExceptionAllowsInsecureHTTPLoads": yes])
    ])
])

let fixScenarios: [FixScenario] =
    IOSProfile.allCases.filter { $0 < .ios26 }.flatMap { profile in
        [
            FixScenario(
                name: "TLS 1.0-only server", ats: dict([:]), profile: profile, host: "old.example.net",
                facts: failedHandshake(.alertReceived(70), versions: [.tls10], preferred: 0xC013, forwardSecret: true)),
            FixScenario(
                name: "static-RSA-only server", ats: dict([:]), profile: profile, host: "rsa.example.net",
                facts: failedHandshake(
                    .alertReceived(40), versions: [.tls12], preferred: 0x009C, forwardSecret: false)),
            FixScenario(
                name: "TLS 1.1 + static RSA under a parent entry", ats: parentPolicy, profile: profile,
                host: "legacy.example.com",
                facts: failedHandshake(
                    .alertReceived(40), versions: [.tls10, .tls11], preferred: 0x002F, forwardSecret: false)),
        ]
    }
    + [IOSProfile.ios9, .ios10].map { profile in
        FixScenario(
            name: "SHA-1 leaf under ATS", ats: dict([:]), profile: profile, host: "api.example.com",
            facts: handshake(version: .tls12, suite: 0xC02F, chain: [cert(hash: .sha1), caCert()]))
    }

struct FixRoundTripTests {
    @Test("applying the suggested fix makes the connection pass", arguments: fixScenarios)
    func roundTrip(_ s: FixScenario) throws {
        let before = policy(s.ats, s.profile)
        let verdict = before.evaluate(s.facts, against: try #require(req(before, https(s.host))))
        let fix = try #require(verdict.combinedFix)
        #expect(fix.domain == s.host)
        let applied: PlistValue = try #require(s.ats.applying(fix))
        let after = policy(applied, s.profile)
        let r = try #require(req(after, https(s.host)))
        // The server now gets a version and suite it supports: replay the handshake as it would then complete.
        let caps = s.facts.serverCapabilities
        let facts: HandshakeFacts
        if let caps {
            let version = try #require(caps.supportedVersions.filter { r.offeredVersions.contains($0) }.max())
            let suite = try #require(caps.preferredCipherCode)
            #expect(r.offeredCipherSuites?.contains { $0.code == suite } ?? true)
            facts = handshake(version: version, suite: suite)
        } else {
            facts = s.facts
        }
        #expect(after.evaluate(facts, against: r) == .allowed)
        // The parent entry's settings survive for this host.
        if s.ats == parentPolicy { #expect(!cleartextBlocked(after, s.host)) }
    }

    @Test("applying the -1022 fix lets the http:// load through", arguments: IOSProfile.allCases)
    func cleartextRoundTrip(profile: IOSProfile) throws {
        for ats in [dict([:]), parentPolicy, ConfigExample.chat] {
            let before = policy(ats, profile)
            for host in ["api.example.org", "x.hosted-chat.example", "update.hosted-chat.example"]
            where cleartextBlocked(before, host) {
                let v = try #require(before.requirements(for: http(host)).violation)
                let applied: PlistValue = try #require(ats.applying(v.fix))
                let after = policy(applied, profile)
                #expect(!cleartextBlocked(after, host), "\(host)")
            }
        }
    }
}
