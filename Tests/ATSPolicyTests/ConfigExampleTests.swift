import ATSPolicy
import Testing

/// The four configurations of GitHub issue 2, as policies (Apple's own examples in doc A2/A4 and the chat/browser
/// patterns of §2.1 rows 1–2).
enum ConfigExample {
    static let mediaServer = dict([
        "NSExceptionDomains": domains([
            "media-server.example.com": dict(["NSExceptionAllowsInsecureHTTPLoads": yes])
        ])
    ])
    static let lessSecure = dict([
        "NSExceptionDomains": domains([
            "less-secure.example.com": dict([
                "NSExceptionRequiresForwardSecrecy": no, "NSExceptionMinimumTLSVersion": str("TLSv1.0"),
            ])
        ])
    ])
    static let browser = dict([
        "NSAllowsArbitraryLoads": yes,
        "NSExceptionDomains": domains([
            "api.example.com": dict([
                "NSExceptionAllowsInsecureHTTPLoads": no, "NSExceptionRequiresForwardSecrecy": yes,
                "NSExceptionMinimumTLSVersion": str("TLSv1.2"),
            ])
        ]),
    ])
    static let chat = dict([
        "NSAllowsArbitraryLoads": yes,
        "NSExceptionDomains": domains([
            "hosted-chat.example": dict(["NSExceptionAllowsInsecureHTTPLoads": no, "NSIncludesSubdomains": yes]),
            "update.hosted-chat.example": dict(["NSExceptionRequiresForwardSecrecy": no]),
        ]),
    ])
}

struct ConfigExampleTests {
    // §2.1 row 2: AllowsInsecureHTTPLoads lets http through for that host only; others keep full ATS.
    @Test("media server: http allowed for the excepted host only (§2.1 row 2, §1.2)", arguments: IOSProfile.allCases)
    func mediaServer(profile: IOSProfile) throws {
        let p = policy(ConfigExample.mediaServer, profile)
        #expect(!cleartextBlocked(p, "media-server.example.com"))
        #expect(cleartextBlocked(p, "other.example.com"))
        #expect(cleartextBlocked(p, "sub.media-server.example.com"))  // no NSIncludesSubdomains
        let r = try #require(req(p, https("media-server.example.com")))
        // A12: insecure HTTP alone does not change TLS version or PFS requirements.
        #expect(r.minimumTLSVersion == .tls12)
        #expect(r.requiresForwardSecrecy)
        #expect(!r.atsEnforced)
        #expect(r.offeredCipherSuites == CipherSuite.atsGroup(profile.cipherSuiteEra))
    }

    @Test("less secure: TLS 1.0 and static RSA allowed for that host (§1.2, §3.2)", arguments: IOSProfile.allCases)
    func lessSecure(profile: IOSProfile) throws {
        let p = policy(ConfigExample.lessSecure, profile)
        #expect(cleartextBlocked(p, "less-secure.example.com"))
        let r = try #require(req(p, https("less-secure.example.com")))
        #expect(r.minimumTLSVersion == .tls10)
        #expect(!r.requiresForwardSecrecy)
        #expect(r.atsEnforced)
        let era = profile.cipherSuiteEra
        #expect(r.offeredCipherSuites == CipherSuite.compatibilityGroup(era) + CipherSuite.atsGroup(era))
        // iOS 26 never offers below TLS 1.2, whatever the exception says.
        #expect(r.offeredVersions.first == (profile == .ios26 ? .tls12 : .tls10))
    }

    @Test(
        "browser: arbitrary loads for the web, api.example.com re-enabled (§2.1 rows 1, 2, 7)",
        arguments: IOSProfile.allCases)
    func browser(profile: IOSProfile) throws {
        let p = policy(ConfigExample.browser, profile)
        #expect(!cleartextBlocked(p, "news.example.org"))
        #expect(cleartextBlocked(p, "api.example.com"))
        let open = try #require(req(p, https("news.example.org")))
        #expect(!open.atsEnforced)
        #expect(open.offeredCipherSuites == nil)
        let api = try #require(req(p, https("api.example.com")))
        #expect(api.atsEnforced && api.requiresForwardSecrecy && api.minimumTLSVersion == .tls12)
        #expect(api.decidedBy.keyPath == ["NSAppTransportSecurity", "NSExceptionDomains", "api.example.com"])
    }

    @Test("chat: subdomains covered, update host replaces the parent entry (§2.2)", arguments: IOSProfile.allCases)
    func chat(profile: IOSProfile) throws {
        let p = policy(ConfigExample.chat, profile)
        #expect(cleartextBlocked(p, "hosted-chat.example"))
        #expect(cleartextBlocked(p, "eu.hosted-chat.example"))
        #expect(cleartextBlocked(p, "update.hosted-chat.example"))
        #expect(!cleartextBlocked(p, "elsewhere.example"))
        let eu = try #require(req(p, https("eu.hosted-chat.example")))
        #expect(eu.requiresForwardSecrecy && eu.atsEnforced)
        #expect(eu.decidedBy.keyPath.last == "hosted-chat.example")
        let update = try #require(req(p, https("update.hosted-chat.example")))
        #expect(!update.requiresForwardSecrecy)
        #expect(update.decidedBy.keyPath.last == "update.hosted-chat.example")
    }
}
