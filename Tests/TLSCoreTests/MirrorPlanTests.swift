import ATSPolicy
import Foundation
import Testing
import TLSCore

/// Upstream facts in, client-leg configuration and leaf template out: one case per weakness mirror mode reproduces.
@Suite("MirrorPlan")
struct MirrorPlanTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    /// A healthy RSA-2048 leaf for api.test, trusted by a user-installed root, then `change`d.
    static func facts(
        version: TLSVersion = .tls13, suite: String = "TLS_AES_128_GCM_SHA256", trust: TrustResult = .trustedByUserRoot,
        hostnameMatches: Bool = true, change: (inout CertificateFacts) -> Void = { _ in }
    ) -> (HandshakeFacts, String) {
        var leaf = CertificateFacts(
            subject: "CN=api.test", issuer: "CN=Test CA", keyType: .rsa, keyBits: 2048, signatureHash: .sha256,
            isSelfSigned: false, isCA: false, notBefore: now.addingTimeInterval(-86_400),
            notAfter: now.addingTimeInterval(89 * 86_400), dnsNames: ["api.test"], ipAddresses: [],
            extendedKeyUsages: [CertificateFacts.serverAuthOID], embeddedSCTCount: 0, spkiSHA256Base64: "",
            sha256Fingerprint: "")
        change(&leaf)
        let facts = HandshakeFacts(
            version: version, cipherSuiteCode: nil, cipherSuiteName: nil, keyExchangeGroup: nil, alpn: nil,
            chain: [leaf], trust: trust, hostnameMatches: hostnameMatches, observedAt: now)
        return (facts, suite)
    }

    static func plan(_ f: (HandshakeFacts, String)) -> MirrorPlan {
        MirrorPlan(facts: f.0, suiteOpenSSLName: f.1)
    }

    @Test("A healthy upstream (TLS 1.3 or TLS 1.2 ECDHE-GCM, flawless leaf) is served exactly as today")
    func healthy() {
        #expect(Self.plan(Self.facts()).isHealthy)
        let tls12 = Self.plan(Self.facts(version: .tls12, suite: "ECDHE-RSA-AES128-GCM-SHA256"))
        #expect(tls12.isHealthy)
        #expect(tls12.weaknesses.isEmpty)
        #expect(!tls12.needsSecurityLevelZero)
    }

    @Test("TLS 1.0 and TLS 1.1: that version and no higher, TLS 1.0 upwards, the server's suite, security level 0")
    func oldVersions() throws {
        for version in [TLSVersion.tls10, .tls11] {
            let plan = Self.plan(Self.facts(version: version, suite: "ECDHE-RSA-AES256-SHA"))
            let p = try #require(plan.protocolMirror)
            #expect(p.maximumVersion == version)
            #expect(p.minimumVersion == .tls10)
            #expect(p.cipherSuite == "ECDHE-RSA-AES256-SHA")
            #expect(plan.weaknesses.starts(with: [version.plistName, "CBC"]))
            #expect(plan.needsSecurityLevelZero)
            // ECDHE-RSA needs an RSA leaf.
            #expect(plan.leaf.keyKind == .rsa2048)
        }
    }

    @Test("No forward secrecy: static RSA key exchange is served, with an RSA leaf")
    func staticRSA() throws {
        let plan = Self.plan(Self.facts(version: .tls12, suite: "AES128-GCM-SHA256"))
        let p = try #require(plan.protocolMirror)
        #expect(p.cipherSuite == "AES128-GCM-SHA256")
        #expect(p.minimumVersion == .tls12 && p.maximumVersion == .tls12)
        #expect(plan.weaknesses == ["static RSA key exchange"])
        #expect(plan.leaf.keyKind == .rsa2048)
    }

    @Test("CBC only: the CBC suite is served at TLS 1.2 (TLS 1.3 has only AEAD suites)")
    func cbc() throws {
        let plan = Self.plan(Self.facts(version: .tls12, suite: "ECDHE-RSA-AES128-SHA256"))
        let p = try #require(plan.protocolMirror)
        #expect(p.cipherSuite == "ECDHE-RSA-AES128-SHA256")
        #expect(p.maximumVersion == .tls12)
        #expect(plan.weaknesses == ["CBC"])
    }

    @Test("The client leg's configuration carries the plan: versions, the one suite, level 0, the ALPN")
    func configuration() throws {
        let plan = Self.plan(Self.facts(version: .tls10, suite: "AES128-SHA"))
        let ca = try CertificateAuthority.create()
        let identity = try LeafMinter(authority: ca).identity(for: "api.test", options: plan.leaf)
        let c = plan.serverConfiguration(identity: identity, alpn: ["http/1.1"])
        #expect(c.minimumVersion == .tls10)
        #expect(c.maximumVersion == .tls10)
        #expect(c.cipherList == "AES128-SHA")
        #expect(c.securityLevel == 0)
        #expect(c.alpnProtocols == ["http/1.1"])
        // OpenSSL 3 builds it: TLS 1.0 and a static-RSA suite at level 0.
        _ = try TLSContext(c)
        // A healthy plan leaves today's defaults alone.
        let healthy = MirrorPlan.healthy.serverConfiguration(identity: identity, alpn: [])
        #expect(healthy.minimumVersion == nil && healthy.maximumVersion == nil && healthy.cipherList == nil)
        #expect(healthy.securityLevel == nil)
    }

    @Test("RSA-1024 and EC below 256 bits: the key is copied")
    func weakKeys() {
        let rsa = Self.plan(Self.facts { $0.keyBits = 1024 })
        #expect(rsa.leaf.keyKind == .rsa(bits: 1024))
        #expect(rsa.weaknesses == ["leaf RSA-1024"])
        #expect(rsa.protocolMirror == nil)
        #expect(rsa.needsSecurityLevelZero)
        let ec = Self.plan(Self.facts { $0.keyType = .ec; $0.keyBits = 224; $0.curve = "secp224r1" })
        #expect(ec.leaf.keyKind == .ec(curve: "secp224r1"))
        #expect(ec.weaknesses == ["leaf EC-224"])
    }

    @Test("A SHA-1 signature is copied (MD5 as the nearest weak hash OpenSSL still signs with)")
    func sha1() {
        let plan = Self.plan(Self.facts { $0.signatureHash = .sha1 })
        #expect(plan.leaf.digest == .sha1)
        #expect(plan.weaknesses == ["leaf SHA-1"])
        #expect(plan.needsSecurityLevelZero)
        #expect(Self.plan(Self.facts { $0.signatureHash = .md5 }).leaf.digest == .sha1)
    }

    @Test("Expired, not yet valid, 900 days: the upstream leaf's own dates")
    func dates() {
        let expiredStart = Self.now.addingTimeInterval(-90 * 86_400)
        let expiredEnd = Self.now.addingTimeInterval(-86_400)
        let expired = Self.plan(Self.facts { $0.notBefore = expiredStart; $0.notAfter = expiredEnd })
        #expect(expired.leaf.notBefore == expiredStart && expired.leaf.notAfter == expiredEnd)
        #expect(expired.weaknesses == ["leaf expired"])
        let future = Self.plan(Self.facts { $0.notBefore = Self.now.addingTimeInterval(86_400) })
        #expect(future.weaknesses == ["leaf not yet valid"])
        let long = Self.plan(Self.facts { $0.notAfter = $0.notBefore.addingTimeInterval(900 * 86_400) })
        #expect(long.leaf.notAfter == long.leaf.notBefore?.addingTimeInterval(900 * 86_400))
        #expect(long.weaknesses == ["leaf valid 900 days"])
        #expect(long.notReproduced.isEmpty)
        // 500 days under a system root breaks the 398-day rule, which the user-installed proxy CA does not have.
        let system = Self.plan(Self.facts(trust: .trustedBySystemRoot) {
            $0.notAfter = $0.notBefore.addingTimeInterval(500 * 86_400)
            $0.embeddedSCTCount = 3
        })
        #expect(system.notReproduced.count == 1)
        #expect(system.notReproduced.first?.contains("398-day") == true)
    }

    @Test("A name mismatch: the SANs exactly as the server's")
    func wrongName() {
        let plan = Self.plan(Self.facts(hostnameMatches: false) { $0.dnsNames = ["other.test", "*.other.test"] })
        #expect(plan.leaf.subjectAlternativeNames == ["other.test", "*.other.test"])
        #expect(plan.weaknesses == ["leaf names other.test,*.other.test"])
    }

    @Test("No EKU, or an EKU without serverAuth: copied as it is")
    func eku() {
        let none = Self.plan(Self.facts { $0.extendedKeyUsages = nil })
        #expect(!none.leaf.includeServerAuthEKU && none.leaf.extendedKeyUsageOIDs == nil)
        #expect(none.weaknesses == ["leaf no EKU"])
        let client = Self.plan(Self.facts { $0.extendedKeyUsages = ["1.3.6.1.5.5.7.3.2"] })
        #expect(client.leaf.extendedKeyUsageOIDs == ["1.3.6.1.5.5.7.3.2"])
        #expect(client.weaknesses == ["leaf EKU without serverAuth"])
    }

    @Test("Self-signed and unknown-root chains: a leaf from the never-trusted CA")
    func untrusted() {
        let selfSigned = Self.plan(Self.facts(trust: .untrusted(.selfSigned)))
        #expect(selfSigned.leaf.issuer == .untrustedAuthority)
        #expect(selfSigned.weaknesses == ["leaf self-signed chain"])
        #expect(Self.plan(Self.facts(trust: .untrusted(.unknownRoot))).leaf.issuer == .untrustedAuthority)
    }

    @Test("What cannot be reproduced is said: CT under a system root, revocation")
    func notReproduced() {
        let ct = Self.plan(Self.facts(trust: .trustedBySystemRoot))
        #expect(ct.isHealthy)
        #expect(ct.notReproduced.contains { $0.hasPrefix("Certificate Transparency") })
        let revoked = Self.plan(Self.facts(trust: .untrusted(.revoked)))
        #expect(revoked.notReproduced.contains { $0.hasPrefix("revocation") })
    }

    @Test("Several flaws at once are all copied")
    func combined() throws {
        let plan = Self.plan(Self.facts(version: .tls10, suite: "AES256-SHA", trust: .untrusted(.selfSigned)) {
            $0.keyBits = 1024
            $0.signatureHash = .sha1
        })
        #expect(plan.weaknesses == ["TLSv1.0", "static RSA key exchange", "CBC", "leaf RSA-1024", "leaf SHA-1",
            "leaf self-signed chain"])
        #expect(plan.leaf.keyKind == .rsa(bits: 1024))
        #expect(try #require(plan.protocolMirror).maximumVersion == .tls10)
    }
}

extension MirrorPlanTests {
    @Test("The widest iOS offer: TLS 1.0 to 1.3, forward-secret suites before static RSA, built by OpenSSL 3")
    func widestOffer() throws {
        let c = UpstreamTLS.iOSWidestConfiguration(alpn: ["http/1.1"])
        #expect(c.minimumVersion == .tls10 && c.maximumVersion == .tls13)
        let list = try #require(c.cipherList).split(separator: ":").map(String.init)
        let firstStatic = try #require(list.firstIndex { !$0.hasPrefix("ECDHE-") })
        #expect(list[..<firstStatic].allSatisfy { $0.hasPrefix("ECDHE-") })
        #expect(list[firstStatic...].allSatisfy { !$0.hasPrefix("ECDHE-") })
        #expect(list.contains("AES128-SHA") && list.contains("ECDHE-RSA-AES256-SHA"))
        #expect(c.tls13CipherSuites == "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256")
        _ = try TLSContext(c)
    }
}
