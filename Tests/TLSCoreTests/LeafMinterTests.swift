import ATSPolicy
import Foundation
import Testing
import TLSCore

@Suite("LeafMinter")
struct LeafMinterTests {
    let ca: CertificateAuthority
    let minter: LeafMinter
    let trust: TrustEvaluator

    init() throws {
        ca = try CertificateAuthority.create()
        minter = LeafMinter(authority: ca, cacheCapacity: 3)
        trust = try TrustEvaluator(useSystemRoots: true, userRoots: [ca.certificate])
    }

    /// The Apple server-certificate rules of reference §3.3/§3.4 that a minted leaf must meet.
    func expectAppleCompliant(_ leaf: CertificateFacts, host: String, now: Date) {
        #expect(CertificateInspector.hostnameMatches(host, leaf: leaf))
        #expect(leaf.extendedKeyUsages?.contains(CertificateFacts.serverAuthOID) == true)
        #expect(leaf.signatureHash.isSHA2OrBetter)
        #expect(!leaf.isCA)
        let days = leaf.notAfter.timeIntervalSince(leaf.notBefore) / 86400
        #expect(days <= 397)
        #expect(leaf.notBefore <= now.addingTimeInterval(-3000))
        #expect(leaf.notAfter > now)
        switch leaf.keyType {
        case .ec: #expect(leaf.keyBits >= 256)
        case .rsa: #expect(leaf.keyBits >= 2048)
        default: Issue.record("unexpected key type \(leaf.keyType)")
        }
    }

    @Test(arguments: [
        ("api.example.com", LeafOptions.standard), ("127.0.0.1", .standard), ("::1", .standard),
        ("www.example.org", .rsa),
    ])
    func mintedLeavesAreAppleCompliantAndTrustedByTheUserRoot(host: String, options: LeafOptions) throws {
        let now = Date()
        let identity = try minter.identity(for: host, options: options, now: now)
        let leaf = CertificateInspector.facts(identity.chain[0])
        expectAppleCompliant(leaf, host: host, now: now)
        #expect(ATSPolicy.appleRuleViolations(leaf: leaf, host: host, now: now).isEmpty)
        #expect(trust.evaluate(chain: identity.chain, at: now).result == .trustedByUserRoot)
        if options == .rsa {
            #expect(leaf.keyType == .rsa)
            #expect(leaf.keyBits == 2048)
            let text = try runOpenSSL(["x509", "-noout", "-text"], input: identity.chain[0].pem)
            #expect(text.contains("Digital Signature, Key Encipherment"))
        }
        let text = try runOpenSSL(["x509", "-noout", "-text"], input: identity.chain[0].pem)
        #expect(text.contains("X509v3 Authority Key Identifier"))
        #expect(text.contains("X509v3 Subject Key Identifier"))
    }

    @Test func leavesAreCachedAndTheCacheIsBounded() throws {
        let a = try minter.identity(for: "a.test")
        #expect(try minter.identity(for: "A.TEST").chain[0] === a.chain[0])
        _ = try minter.identity(for: "b.test")
        _ = try minter.identity(for: "c.test")
        _ = try minter.identity(for: "a.test")  // refresh a
        _ = try minter.identity(for: "d.test")  // evicts b, the least recently used
        #expect(minter.cachedCount == 3)
        #expect(try minter.identity(for: "a.test").chain[0] === a.chain[0])
    }

    @Test func keyPairIsReusedPerKeyKind() throws {
        let a = try minter.identity(for: "one.test")
        let b = try minter.identity(for: "two.test")
        #expect(a.key === b.key)
        #expect(a.chain[0].facts.spkiSHA256Base64 == b.chain[0].facts.spkiSHA256Base64)
        #expect(a.chain[0].facts.sha256Fingerprint != b.chain[0].facts.sha256Fingerprint)
    }

    @Test func mintingFromManyThreadsIsSafe() async throws {
        let minter = self.minter
        try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<24 {
                group.addTask { try minter.identity(for: "host\(i % 6).test").chain[0].subject }
            }
            var count = 0
            for try await _ in group { count += 1 }
            #expect(count == 24)
        }
        #expect(minter.cachedCount == 3)
    }

    @Test(arguments: ["", "bad host", "a,DNS:evil.com", "exa mple.com", "*bad.com"])
    func invalidHostsAreRejected(host: String) {
        #expect(throws: MintError.invalidHost(host)) { try minter.identity(for: host) }
    }

    @Test func flawedLeavesHaveExactlyTheirFlaw() throws {
        let now = Date()
        let expired = try minter.identity(for: "x.test", options: .expired(now: now), now: now)
        #expect(trust.evaluate(chain: expired.chain, at: now).result == .untrusted(.expired))

        let early = try minter.identity(for: "x.test", options: .notYetValid(now: now), now: now)
        #expect(trust.evaluate(chain: early.chain, at: now).result == .untrusted(.notYetValid))

        let wrong = try minter.identity(for: "x.test", options: .wrongHost(), now: now)
        #expect(!CertificateInspector.hostnameMatches("x.test", leaf: wrong.chain[0].facts))
        #expect(trust.evaluate(chain: wrong.chain, at: now).result == .trustedByUserRoot)

        let sha1 = try minter.identity(for: "x.test", options: .sha1Signed, now: now)
        #expect(sha1.chain[0].facts.signatureHash == .sha1)

        let weak = try minter.identity(for: "x.test", options: .weakRSA, now: now)
        #expect(weak.chain[0].facts.keyType == .rsa)
        #expect(weak.chain[0].facts.keyBits == 1024)

        let untrusted = try minter.identity(for: "x.test", options: .untrusted, now: now)
        #expect(trust.evaluate(chain: untrusted.chain, at: now).result == .untrusted(.unknownRoot))

        let selfSigned = try minter.identity(for: "x.test", options: .selfSigned, now: now)
        #expect(selfSigned.chain.count == 1)
        #expect(trust.evaluate(chain: selfSigned.chain, at: now).result == .untrusted(.selfSigned))

        // The policy engine's own rule check names each flaw.
        let kinds = { (i: TLSConfiguration.ServerIdentity) in
            ATSPolicy.appleRuleViolations(leaf: i.chain[0].facts, host: "x.test", now: now).map(\.kind)
        }
        #expect(kinds(expired) == [.expired])
        #expect(kinds(early) == [.notYetValid])
        #expect(kinds(wrong) == [.hostnameMismatch])
        #expect(kinds(sha1) == [.weakSignatureHash])
        #expect(kinds(weak) == [.weakKey])

        let noSAN = try minter.identity(
            for: "x.test", options: LeafOptions(subjectAlternativeNames: [], includeServerAuthEKU: false), now: now)
        #expect(noSAN.chain[0].facts.dnsNames.isEmpty)
        #expect(noSAN.chain[0].facts.extendedKeyUsages == nil)
        #expect(!CertificateInspector.hostnameMatches("x.test", leaf: noSAN.chain[0].facts))
    }

    @Test func flawedLeavesStillHandshakeWithAPermissiveClient() throws {
        // SHA-1 and RSA-1024 leaves need security level 0 on the server side to be usable at all.
        for options in [LeafOptions.sha1Signed, .weakRSA] {
            let identity = try minter.identity(for: "flaw.test", options: options)
            var server = TLSConfiguration.server(identity: identity)
            server.securityLevel = 0
            var client = TLSConfiguration.client()
            client.securityLevel = 0
            let pair = EnginePair(
                client: try TLSEngine(context: TLSContext(client), serverName: "flaw.test"),
                server: try TLSEngine(context: TLSContext(server)))
            #expect(pair.handshake().client == .complete)
        }
    }
}
