import ATSPolicy
import Testing

/// Expected codes per profile for one violation kind (reference §4.4).
struct CodeCase: CustomTestStringConvertible, Sendable {
    let row: String
    let profile: IOSProfile
    let kind: ViolationKind
    let url: Int
    let ssl: Int?
    var testDescription: String { "\(row) on \(profile): \(kind) → \(url)/\(ssl.map(String.init) ?? "-")" }
}

let versionCodeCases: [CodeCase] = [
    CodeCase(row: "§4.4 row 2", profile: .ios9, kind: .tlsVersionTooLow, url: -1200, ssl: -9824),
    CodeCase(row: "§4.4 row 2", profile: .ios10, kind: .tlsVersionTooLow, url: -1200, ssl: -9801),
    CodeCase(row: "§4.4 row 2", profile: .ios14, kind: .tlsVersionTooLow, url: -1200, ssl: -9836),
    CodeCase(row: "§4.4 row 2", profile: .ios17, kind: .tlsVersionTooLow, url: -1200, ssl: -9836),
    CodeCase(row: "§4.4 last row", profile: .ios26, kind: .tlsVersionRefusedByOS, url: -1200, ssl: -9836),
]

let cipherCodeCases: [CodeCase] = [
    CodeCase(row: "§4.4 row 3", profile: .ios9, kind: .cipherSuiteNotAllowed, url: -1200, ssl: -9824),
    CodeCase(row: "§4.4 row 3", profile: .ios10, kind: .cipherSuiteNotAllowed, url: -1200, ssl: -9801),
    CodeCase(row: "§4.4 row 3", profile: .ios14, kind: .cipherSuiteNotAllowed, url: -1200, ssl: -9824),
    CodeCase(row: "§4.4 row 3", profile: .ios26, kind: .cipherSuiteNotAllowed, url: -1200, ssl: -9824),
]

let weakCertCodeCases: [CodeCase] = [
    CodeCase(row: "§4.4 rows 4–5", profile: .ios9, kind: .weakSignatureHash, url: -1200, ssl: -9802),
    CodeCase(row: "§4.4 rows 4–5", profile: .ios10, kind: .weakKey, url: -1200, ssl: -9802),
    CodeCase(row: "§4.4 rows 4–5", profile: .ios14, kind: .weakSignatureHash, url: -1202, ssl: -9802),
    CodeCase(row: "§4.4 rows 4–5", profile: .ios26, kind: .weakKey, url: -1202, ssl: -9802),
]

struct EvaluationTests {
    @Test("a good modern connection is allowed on every profile", arguments: IOSProfile.allCases)
    func allowed(profile: IOSProfile) throws {
        let p = policy(nil, profile)
        let r = try #require(req(p, https("api.example.com")))
        let version: TLSVersion = profile >= .ios14 ? .tls13 : .tls12
        let suite: UInt16 = profile >= .ios14 ? 0x1301 : 0xC02F
        #expect(p.evaluate(handshake(version: version, suite: suite), against: r) == .allowed)
    }

    @Test("server speaks only TLS 1.0: version violation with the profile's codes", arguments: versionCodeCases)
    func versionRefusal(_ c: CodeCase) throws {
        let p = policy(nil, c.profile)
        let r = try #require(req(p, https("old.example.com")))
        let facts = failedHandshake(.alertReceived(70), versions: [.tls10], preferred: 0xC013, forwardSecret: true)
        let v = try #require(p.evaluate(facts, against: r).violations.first)
        #expect(v.kind == c.kind)
        #expect(v.urlError.code == c.url)
        #expect(v.sslError?.code == c.ssl)
        if c.profile >= .ios26 {
            #expect(v.fix.isNoExceptionCanHelp)
            #expect(v.explanation.contains("even with an exception"))
        } else {
            #expect(
                v.fix
                    == .setKeys(
                        domain: "old.example.com",
                        keys: [FixKey(key: "NSExceptionMinimumTLSVersion", value: str("TLSv1.0"))]))
            #expect(v.explanation == "server supports only TLSv1.0; ATS requires TLSv1.2 or later")
        }
    }

    @Test(
        "server offers only static RSA: cipher violation, fix NSExceptionRequiresForwardSecrecy = NO",
        arguments: cipherCodeCases)
    func staticRSAOnly(_ c: CodeCase) throws {
        let p = policy(nil, c.profile)
        let r = try #require(req(p, https("rsa.example.com")))
        let facts = failedHandshake(.alertReceived(40), versions: [.tls12], preferred: 0x009C, forwardSecret: false)
        let verdict = p.evaluate(facts, against: r)
        #expect(verdict.violations.count == 1)
        let v = try #require(verdict.violations.first)
        #expect(v.kind == c.kind && v.urlError.code == c.url && v.sslError?.code == c.ssl)
        #expect(v.fix.keyMap == ["NSExceptionRequiresForwardSecrecy": no])
        #expect(v.explanation.contains("TLS_RSA_WITH_AES_128_GCM_SHA256"))
    }

    @Test("TLS 1.0 and static RSA: both violations, one combined fix (§4.4 rows 2–3)")
    func everyViolation() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("legacy.example.com")))
        let verdict = p.evaluate(
            failedHandshake(.alertReceived(40), versions: [.tls10], preferred: 0x002F, forwardSecret: false), against: r
        )
        #expect(verdict.violations.map(\.kind) == [.tlsVersionTooLow, .cipherSuiteNotAllowed])
        #expect(
            verdict.combinedFix
                == .setKeys(
                    domain: "legacy.example.com",
                    keys: [
                        FixKey(key: "NSExceptionMinimumTLSVersion", value: str("TLSv1.0")),
                        FixKey(key: "NSExceptionRequiresForwardSecrecy", value: no),
                    ]))
    }

    @Test(
        "the less-secure exception lets a TLS 1.0 static-RSA server through, except on iOS 26",
        arguments: IOSProfile.allCases)
    func lessSecureAccepted(profile: IOSProfile) throws {
        let p = policy(ConfigExample.lessSecure, profile)
        let r = try #require(req(p, https("less-secure.example.com")))
        if profile == .ios26 {
            let facts = failedHandshake(.alertReceived(70), versions: [.tls10], preferred: 0x002F, forwardSecret: false)
            let v = try #require(p.evaluate(facts, against: r).primaryViolation)
            #expect(v.kind == .tlsVersionRefusedByOS)
            #expect(v.fix.isNoExceptionCanHelp)
        } else {
            #expect(r.offeredVersions.contains(.tls10))
            #expect(r.offeredCipherSuites?.contains { $0.code == 0x002F } == true)
            #expect(p.evaluate(handshake(version: .tls10, suite: 0x002F), against: r) == .allowed)
        }
    }

    @Test("a completed handshake below the minimum (permissive probe) is a version violation")
    func negotiatedTooLow() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        let v = try #require(p.evaluate(handshake(version: .tls11, suite: 0xC013), against: r).primaryViolation)
        #expect(v.explanation == "server negotiated TLSv1.1; ATS requires TLSv1.2 or later")
        #expect(v.fix.keyMap == ["NSExceptionMinimumTLSVersion": str("TLSv1.1")])
    }

    @Test("§3.2: a suite dropped from the current list (CBC-SHA256) has no fix on iOS 17")
    func droppedSuite() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        let v = try #require(p.evaluate(handshake(version: .tls12, suite: 0xC027), against: r).primaryViolation)
        #expect(v.kind == .cipherSuiteNotAllowed)
        #expect(v.fix.isNoExceptionCanHelp)
        #expect(
            p.evaluate(
                handshake(version: .tls12, suite: 0xC027),
                against: try #require(req(policy(nil, .ios14), https("api.example.com")))) == .allowed)
    }

    @Test("§4.4 row 6: self-signed → -1202/-9813, no exception can help", arguments: IOSProfile.allCases)
    func selfSigned(profile: IOSProfile) throws {
        let p = policy(dict(["NSAllowsArbitraryLoads": yes]), profile)
        let r = try #require(req(p, https("self.example.com")))
        let facts = handshake(
            version: .tls12, suite: 0xC02F, chain: [cert(host: "self.example.com", selfSigned: true)],
            trust: .untrusted(.selfSigned))
        let v = try #require(p.evaluate(facts, against: r).primaryViolation)
        #expect(v.kind == .selfSigned && v.urlError.code == -1202 && v.sslError?.code == -9813)
        #expect(v.fix.isNoExceptionCanHelp)
    }

    @Test("§4.4 row 7: hostname mismatch fails even with NSAllowsArbitraryLoads; every violation is listed")
    func hostnameMismatch() throws {
        let p = policy(dict(["NSAllowsArbitraryLoads": yes]), .ios26)
        let r = try #require(req(p, https("api.example.com")))
        let facts = handshake(
            chain: [cert(host: "other.example.net"), caCert()], trust: .untrusted(.unknownRoot), hostnameMatches: false)
        let vs = p.evaluate(facts, against: r).violations
        #expect(vs.map(\.kind) == [.untrustedRoot, .hostnameMismatch])
        #expect(vs[1].urlError.code == -1202 && vs[1].sslError?.code == -9843)
        #expect(vs[1].explanation.contains("other.example.net"))
        #expect(vs.allSatisfy { $0.fix.isNoExceptionCanHelp })
    }

    static let dateFailures: [(TrustFailure, ViolationKind, Int)] = [
        (.expired, .expired, -9814), (.notYetValid, .notYetValid, -9815), (.revoked, .invalidChain, -9807),
    ]

    @Test("§4.4 row 8: certificate date failures → -1202 with the SSL code", arguments: dateFailures)
    func dateFailure(failure: TrustFailure, kind: ViolationKind, ssl: Int) throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        let v = try #require(p.evaluate(handshake(trust: .untrusted(failure)), against: r).primaryViolation)
        #expect(v.kind == kind && v.urlError.code == -1202 && v.sslError?.code == ssl)
        #expect(!v.notes.isEmpty)  // inferred SSL codes are marked
    }

    @Test("§4.4 rows 4–5: SHA-1 / RSA-1024 codes per profile", arguments: weakCertCodeCases)
    func weakCertificates(_ c: CodeCase) throws {
        let p = policy(nil, c.profile)
        let r = try #require(req(p, https("api.example.com")))
        let leaf = c.kind == .weakKey ? cert(bits: 1024) : cert(hash: .sha1)
        let v = try #require(
            p.evaluate(handshake(version: .tls12, suite: 0xC02F, chain: [leaf, caCert()]), against: r).primaryViolation)
        #expect(v.kind == c.kind && v.urlError.code == c.url && v.sslError?.code == c.ssl)
        if c.profile.hasIOS13TrustRules {
            #expect(v.fix.isNoExceptionCanHelp)
        } else {
            #expect(v.fix.keyMap == ["NSExceptionAllowsInsecureHTTPLoads": yes])
        }
    }

    @Test("§3.6: without ATS, iOS 9/10 default trust accepts SHA-1; iOS 13+ trust does not")
    func weakWithoutATS() throws {
        for (profile, allowed) in [(IOSProfile.ios9, true), (.ios10, true), (.ios14, false), (.ios26, false)] {
            let p = policy(dict(["NSAllowsArbitraryLoads": yes]), profile)
            let r = try #require(req(p, https("api.example.com")))
            let facts = handshake(version: .tls12, suite: 0xC02F, chain: [cert(hash: .sha1), caCert(hash: .sha1)])
            #expect(p.evaluate(facts, against: r).isAllowed == allowed, "\(profile)")
        }
    }

    @Test("the self-signed root of a chain is not judged for its hash")
    func rootHashSkipped() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        var root = caCert(hash: .sha1)
        root.isSelfSigned = true
        #expect(p.evaluate(handshake(chain: [cert(), root]), against: r) == .allowed)
    }

    static let ekuRows: [(TrustResult, [String]?, UserRootEKUReading, Bool)] = [
        (.trustedBySystemRoot, nil, .sourceLenient, false),
        (.trustedBySystemRoot, [CertificateFacts.serverAuthOID], .sourceLenient, true),
        (.trustedByUserRoot, nil, .sourceLenient, true),
        (.trustedByUserRoot, ["1.3.6.1.5.5.7.3.2"], .sourceLenient, false),
        (.trustedByUserRoot, [CertificateFacts.anyEKUOID], .sourceLenient, true),
        (.trustedByUserRoot, nil, .documentedStrict, false),
    ]

    @Test("§3.3 EKU: strict for system roots; under user roots per the chosen reading", arguments: ekuRows)
    func eku(trust: TrustResult, ekus: [String]?, reading: UserRootEKUReading, allowed: Bool) throws {
        let p = policy(nil, .ios17, options: PolicyOptions(userRootEKU: reading))
        let r = try #require(req(p, https("api.example.com")))
        let verdict = p.evaluate(handshake(chain: [cert(ekus: ekus), caCert()], trust: trust), against: r)
        #expect(verdict.isAllowed == allowed)
        if !allowed { #expect(verdict.primaryViolation?.kind == .missingServerAuthEKU) }
        #expect(r.decidedBy.notes.contains { $0.contains("Apple's open-source trust code") })
    }

    static let lifetimeRows: [(TrustResult, Double, Bool)] = [
        (.trustedBySystemRoot, 398, true), (.trustedBySystemRoot, 399, false), (.trustedByUserRoot, 825, true),
        (.trustedByUserRoot, 826, false),
    ]

    @Test(
        "§3.3 validity period limits (398 days system roots after 2020-09, 825 days user roots)",
        arguments: lifetimeRows)
    func lifetime(trust: TrustResult, days: Double, allowed: Bool) throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        let verdict = p.evaluate(handshake(chain: [cert(lifetimeDays: days), caCert()], trust: trust), against: r)
        #expect(verdict.isAllowed == allowed)
        if !allowed {
            #expect(verdict.primaryViolation?.kind == .validityTooLong)
            // The explanation says which rule applies: its start date, the kind of root and the limit.
            let rule = trust == .trustedBySystemRoot
                ? "issued from 1 September 2020 under a system root may be valid for at most 398 days"
                : "issued from 1 July 2019 under a user-installed root may be valid for at most 825 days"
            #expect(verdict.primaryViolation?.explanation.contains(rule) == true)
        }
        // No lifetime limits before iOS 13.
        #expect(
            policy(nil, .ios10).evaluate(
                handshake(version: .tls12, suite: 0xC02F, chain: [cert(lifetimeDays: 2000), caCert()], trust: trust),
                against: try #require(req(policy(nil, .ios10), https("api.example.com")))
            ).isAllowed)
    }

    @Test("§4.4 row 10: pin mismatch → -1202/-9886 with the served SPKI in the fix")
    func pinMismatch() throws {
        let pin = "PINPINPINPINPINPINPINPINPINPINPINPINPINPIN0="
        let p = policy(
            dict([
                "NSPinnedDomains": dict([
                    "example.com": dict([
                        "NSIncludesSubdomains": yes,
                        "NSPinnedCAIdentities": .array([dict(["SPKI-SHA256-BASE64": str(pin)])]),
                    ])
                ])
            ]), .ios17)
        let r = try #require(req(p, https("api.example.com")))
        #expect(r.pins?.domain == "example.com")
        let v = try #require(p.evaluate(handshake(), against: r).primaryViolation)
        #expect(v.kind == .pinMismatch && v.urlError.code == -1202 && v.sslError?.code == -9886)
        guard case .noExceptionCanHelp(let reason) = v.fix else { Issue.record("expected no fix"); return }
        #expect(reason.contains(caCert().spkiSHA256Base64))
        #expect(v.notes.contains { $0.contains("unconfirmed") })
        #expect(p.evaluate(handshake(chain: [cert(), caCert(spki: pin)]), against: r) == .allowed)
    }

    @Test("NSRequiresCertificateTransparency: system-trusted leaf needs 2 SCTs; user roots exempt (§3.5)")
    func certificateTransparency() throws {
        let p = policy(
            dict(["NSExceptionDomains": domains(["api.example.com": dict(["NSRequiresCertificateTransparency": yes])])]
            ), .ios17)
        let r = try #require(req(p, https("api.example.com")))
        #expect(
            p.evaluate(handshake(chain: [cert(scts: 0), caCert()]), against: r).primaryViolation?.kind
                == .certificateTransparencyMissing)
        #expect(
            p.evaluate(handshake(chain: [cert(scts: 0), caCert()], trust: .trustedByUserRoot), against: r) == .allowed)
        #expect(p.evaluate(handshake(chain: [cert(scts: 2), caCert()]), against: r) == .allowed)
    }

    @Test("a failed handshake without a probe: alert mapped to the modern peer code, broad fix with a note")
    func alertWithoutProbe() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        let facts = HandshakeFacts(
            failure: .alertReceived(70), version: nil, cipherSuiteCode: nil, cipherSuiteName: nil,
            keyExchangeGroup: nil, alpn: nil, chain: [], trust: .trustedBySystemRoot, hostnameMatches: true,
            observedAt: now)
        let v = try #require(p.evaluate(facts, against: r).primaryViolation)
        #expect(v.kind == .noSharedCipherOrVersion)
        #expect(v.sslError?.code == -9836)
        #expect(v.explanation.contains("protocol_version"))
        #expect(
            v.fix.keyMap == ["NSExceptionMinimumTLSVersion": str("TLSv1.0"), "NSExceptionRequiresForwardSecrecy": no])
    }

    @Test("a non-TLS answer is reported as such")
    func notTLS() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        let facts = HandshakeFacts(
            failure: .notTLS, version: nil, cipherSuiteCode: nil, cipherSuiteName: nil,
            keyExchangeGroup: nil, alpn: nil, chain: [], trust: .trustedBySystemRoot, hostnameMatches: true,
            observedAt: now)
        #expect(p.evaluate(facts, against: r).primaryViolation?.kind == .notTLS)
    }

    /// What `HandshakeFactsCollector` records when no certificate arrived: an empty chain, trust `noCertificate`,
    /// and probes that negotiated nothing.
    private func noCertificate(_ failure: HandshakeFailure) -> HandshakeFacts {
        HandshakeFacts(
            failure: failure, version: nil, cipherSuiteCode: nil, cipherSuiteName: nil, keyExchangeGroup: nil,
            alpn: nil, chain: [], trust: .untrusted(.noCertificate), hostnameMatches: false, observedAt: now,
            serverCapabilities: ServerCapabilities(
                supportedVersions: [], preferredCipherCode: nil, preferredCipherName: nil,
                supportsForwardSecrecy: false))
    }

    @Test("no certificate arrived: the handshake failure is the verdict, not an invalid chain (-1202/-9807)")
    func failureBeforeCertificate() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        let notTLS = p.evaluate(noCertificate(.notTLS), against: r).violations
        #expect(notTLS.map(\.kind) == [.notTLS])
        #expect(notTLS.first?.urlError.code == -1200 && notTLS.first?.sslError?.code == -9800)
        guard case .noExceptionCanHelp(let reason) = notTLS.first?.fix else {
            Issue.record("expected no exception to help")
            return
        }
        #expect(reason.contains("does not speak TLS on port 443"))

        let closed = p.evaluate(noCertificate(.closedDuringHandshake), against: r).violations
        #expect(closed.map(\.kind) == [.connectionFailed])
        #expect(closed.first?.urlError.code == -1200 && closed.first?.sslError?.code == -9806)
        // Also the proxy's block answer, so it points at a check anyone can run, not back at `diagnose`.
        guard case .noExceptionCanHelp(let closedReason) = closed.first?.fix else {
            Issue.record("expected no exception to help a closed handshake")
            return
        }
        #expect(
            closedReason
                == "the server closed the connection during the TLS handshake; check that it serves TLS on port 443, "
                + "e.g. `openssl s_client -connect api.example.com:443`")
        let v6 = try #require(req(p, ConnectionTarget(scheme: "https", host: "2001:db8::1", port: 8443)))
        let closedV6 = p.evaluate(noCertificate(.closedDuringHandshake), against: v6).violations
        guard case .noExceptionCanHelp(let v6Reason) = closedV6.first?.fix else {
            Issue.record("expected no exception to help a closed handshake")
            return
        }
        #expect(v6Reason.hasSuffix("`openssl s_client -connect [2001:db8::1]:8443`"))
    }

    @Test("a timed-out handshake fails with -1001 and no SSL code; what the probe explains follows it")
    func timedOut() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        let alone = p.evaluate(noCertificate(.timedOut), against: r).violations
        #expect(alone.map(\.kind) == [.timedOut])
        #expect(alone.first?.urlError.code == -1001 && alone.first?.sslError == nil)
        let old = failedHandshake(.timedOut, versions: [.tls10], preferred: 0xC013, forwardSecret: true)
        #expect(p.evaluate(old, against: r).violations.map(\.kind) == [.timedOut, .tlsVersionTooLow])
    }

    @Test("a handshake our verifier aborted is explained by the certificate, not by a guess at TLS settings")
    func abortedByVerifier() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        var facts = handshake(trust: .untrusted(.unknownRoot))
        facts.failure = .localError("certificate verify failed")
        facts.serverCapabilities = ServerCapabilities(
            supportedVersions: [.tls12, .tls13], preferredCipherCode: 0x1301, preferredCipherName: nil,
            supportsForwardSecrecy: true)
        #expect(p.evaluate(facts, against: r).violations.map(\.kind) == [.untrustedRoot])
        facts.serverCapabilities = nil
        #expect(p.evaluate(facts, against: r).violations.map(\.kind) == [.untrustedRoot])
    }

    @Test("a DHE-only server (forward secret, but never offered by iOS): no exception can help")
    func dheOnly() throws {
        let p = policy(nil, .ios17)
        let r = try #require(req(p, https("api.example.com")))
        let facts = failedHandshake(.alertReceived(40), versions: [.tls12], preferred: 0x009F, forwardSecret: true)
        let v = try #require(p.evaluate(facts, against: r).primaryViolation)
        #expect(v.kind == .cipherSuiteNotAllowed)
        #expect(v.explanation.contains("0x009F"))
        #expect(v.fix.isNoExceptionCanHelp)
    }
}
