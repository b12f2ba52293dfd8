import ATSPolicy
import Testing

/// One row of reference §2.1 (or §2.4): a policy, a host, a profile, and whether http:// is refused.
struct DecisionCase: CustomTestStringConvertible, Sendable {
    let name: String
    let ats: PlistValue?
    let host: String
    let profile: IOSProfile
    let tlsRequired: Bool
    var options = PolicyOptions()
    var testDescription: String { name }
}

let decisionCases: [DecisionCase] = [
    DecisionCase(
        name: "§2.1 row 8: no NSAppTransportSecurity ⇒ full ATS", ats: nil, host: "example.com",
        profile: .ios26, tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 1: entry replaces NSAllowsArbitraryLoads",
        ats: dict([
            "NSAllowsArbitraryLoads": yes, "NSExceptionDomains": domains(["example.com": dict([:])]),
        ]),
        host: "example.com", profile: .ios17, tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 2: empty entry re-imposes full ATS",
        ats: dict([
            "NSAllowsArbitraryLoads": yes, "NSExceptionDomains": domains(["example.com": dict([:])]),
        ]),
        host: "example.com", profile: .ios9, tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 2: AllowsInsecureHTTPLoads = YES allows http",
        ats: dict([
            "NSExceptionDomains": domains(["example.com": dict(["NSExceptionAllowsInsecureHTTPLoads": yes])])
        ]),
        host: "example.com", profile: .ios26, tlsRequired: false),
    DecisionCase(
        name: "§2.1 row 3: entry beats the local exemption",
        ats: dict([
            "NSExceptionDomains": domains(["myhost.local": dict(["NSExceptionMinimumTLSVersion": str("TLSv1.2")])])
        ]),
        host: "myhost.local", profile: .ios17, tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 5: local host exempt by default", ats: dict([:]), host: "printer.local",
        profile: .ios17, tlsRequired: false),
    DecisionCase(
        name: "§2.1 row 5: NSAllowsLocalNetworking = NO removes the exemption",
        ats: dict([
            "NSAllowsLocalNetworking": no
        ]), host: "printer.local", profile: .ios17, tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 5: NSAllowsLocalNetworking = YES keeps it",
        ats: dict([
            "NSAllowsLocalNetworking": yes
        ]), host: "printer.local", profile: .ios10, tlsRequired: false),
    DecisionCase(
        name: "§2.1 row 6: InWebContent does not exempt URLSession",
        ats: dict([
            "NSAllowsArbitraryLoadsInWebContent": yes
        ]), host: "example.com", profile: .ios17, tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 6: InWebContent exempts WKWebView",
        ats: dict([
            "NSAllowsArbitraryLoadsInWebContent": yes
        ]), host: "example.com", profile: .ios17, tlsRequired: false,
        options: PolicyOptions(client: .webView)),
    DecisionCase(
        name: "§2.1 row 6: ForMedia exempts AVFoundation",
        ats: dict([
            "NSAllowsArbitraryLoadsForMedia": yes
        ]), host: "example.com", profile: .ios14, tlsRequired: false,
        options: PolicyOptions(client: .media)),
    DecisionCase(
        name: "§2.1 row 7: arbitrary loads alone turn ATS off", ats: dict(["NSAllowsArbitraryLoads": yes]),
        host: "example.com", profile: .ios26, tlsRequired: false),
    DecisionCase(
        name: "§2.1 row 7: NSAllowsLocalNetworking present (YES) silences arbitrary loads",
        ats: dict([
            "NSAllowsArbitraryLoads": yes, "NSAllowsLocalNetworking": yes,
        ]), host: "example.com", profile: .ios10,
        tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 7: InWebContent present (NO) silences arbitrary loads",
        ats: dict([
            "NSAllowsArbitraryLoads": yes, "NSAllowsArbitraryLoadsInWebContent": no,
        ]), host: "example.com",
        profile: .ios17, tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 7: ForMedia present silences arbitrary loads",
        ats: dict([
            "NSAllowsArbitraryLoads": yes, "NSAllowsArbitraryLoadsForMedia": yes,
        ]), host: "example.com",
        profile: .ios26, tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 7: on iOS 9 only NSAllowsArbitraryLoads counts",
        ats: dict([
            "NSAllowsArbitraryLoads": yes, "NSAllowsLocalNetworking": yes,
        ]), host: "example.com", profile: .ios9,
        tlsRequired: false),
    DecisionCase(
        name: "§1.2 strict types: \"YES\" string leaves ATS on",
        ats: dict([
            "NSAllowsArbitraryLoads": str("YES")
        ]), host: "example.com", profile: .ios26, tlsRequired: true),
    DecisionCase(
        name: "§2.1 row 9: built-in apple.com exception allows http", ats: nil, host: "www.apple.com",
        profile: .ios26, tlsRequired: false),
    DecisionCase(
        name: "§2.1 row 9: app entry replaces the built-in",
        ats: dict([
            "NSExceptionDomains": domains(["apple.com": dict(["NSIncludesSubdomains": yes])])
        ]), host: "www.apple.com",
        profile: .ios26, tlsRequired: true),
    // §2.4, per profile.
    DecisionCase(
        name: "§2.4 iOS 9: unqualified names are not exempt", ats: nil, host: "intranet", profile: .ios9,
        tlsRequired: true),
    DecisionCase(
        name: "§2.4 iOS 9: IP literals are not exempt", ats: nil, host: "192.168.1.10", profile: .ios9,
        tlsRequired: true),
    DecisionCase(
        name: "§2.4 iOS 10–16: unqualified names exempt", ats: nil, host: "intranet", profile: .ios14,
        tlsRequired: false),
    DecisionCase(
        name: "§2.4 iOS 10–16: any IP literal exempt", ats: nil, host: "203.0.113.1", profile: .ios10,
        tlsRequired: false),
    DecisionCase(
        name: "§2.4 iOS 10–16: .local exempt", ats: nil, host: "nas.local", profile: .ios14,
        tlsRequired: false),
    DecisionCase(
        name: "§2.4 iOS 17+: localhost exempt", ats: nil, host: "localhost", profile: .ios17,
        tlsRequired: false),
    DecisionCase(
        name: "§2.4 iOS 17+: loopback exempt", ats: nil, host: "127.0.0.1", profile: .ios26,
        tlsRequired: false),
    DecisionCase(name: "§2.4 iOS 17+: ::1 exempt", ats: nil, host: "::1", profile: .ios17, tlsRequired: false),
    DecisionCase(
        name: "§2.4 iOS 17+: link-local fe80::1 exempt", ats: nil, host: "fe80::1", profile: .ios17,
        tlsRequired: false),
    DecisionCase(
        name: "§2.4 iOS 17+: public IP needs ATS", ats: nil, host: "203.0.113.1", profile: .ios17,
        tlsRequired: true),
    DecisionCase(
        name: "§2.4 iOS 17+: fe00::1 is not link-local", ats: nil, host: "fe00::1", profile: .ios26,
        tlsRequired: true),
    DecisionCase(
        name: "§2.4 iOS 17+: RFC 1918 not local by default", ats: nil, host: "192.168.1.10",
        profile: .ios17, tlsRequired: true),
    DecisionCase(
        name: "§2.4 iOS 17+: RFC 1918 local under the selectable reading", ats: nil, host: "10.1.2.3",
        profile: .ios17, tlsRequired: false, options: PolicyOptions(privateAddressesAreLocal: true)),
]

struct DecisionOrderTests {
    @Test(arguments: decisionCases)
    func decision(_ c: DecisionCase) {
        let p = policy(c.ats, c.profile, options: c.options)
        #expect(
            cleartextBlocked(p, c.host) == c.tlsRequired, "\(p.requirements(for: http(c.host)).decision?.reason ?? "")")
    }

    @Test("§2.1 row 4: an entry may raise the minimum above the default, under arbitrary loads")
    func entryRaisesRequirements() throws {
        let p = policy(
            dict([
                "NSAllowsArbitraryLoads": yes,
                "NSExceptionDomains": domains([
                    "secure.example.com": dict(["NSExceptionMinimumTLSVersion": str("TLSv1.3")])
                ]),
            ]), .ios17)
        let r = try #require(req(p, https("secure.example.com")))
        #expect(r.minimumTLSVersion == .tls13)
        #expect(r.offeredVersions == [.tls13])
    }

    @Test("-1022 carries no SSL code and the fix is NSExceptionAllowsInsecureHTTPLoads on that host (§4.4 row 1)")
    func cleartextViolation() throws {
        let v = try #require(policy(nil, .ios17).requirements(for: http("api.example.com")).violation)
        #expect(v.kind == .cleartextNotAllowed)
        #expect(v.urlError.code == -1022)
        #expect(v.urlError.name == "NSURLErrorAppTransportSecurityRequiresSecureConnection")
        #expect(v.sslError == nil)
        #expect(
            v.fix
                == .setKeys(
                    domain: "api.example.com",
                    keys: [
                        FixKey(key: "NSExceptionAllowsInsecureHTTPLoads", value: yes)
                    ]))
    }

    @Test("ws:// is treated like http:// (§6 WebSockets)")
    func websocketCleartext() {
        let p = policy(nil, .ios26)
        #expect(p.requirements(for: ConnectionTarget(scheme: "ws", host: "chat.example.com")).violation != nil)
        #expect(p.requirements(for: ConnectionTarget(scheme: "wss", host: "chat.example.com")).requirements != nil)
    }

    @Test("reasons name the rule in plain words")
    func reasons() throws {
        let silenced = policy(dict(["NSAllowsArbitraryLoads": yes, "NSAllowsLocalNetworking": yes]), .ios17)
        let reason = try #require(silenced.requirements(for: http("example.com")).decision?.reason)
        #expect(reason.contains("NSAllowsArbitraryLoads = YES is ignored because NSAllowsLocalNetworking is present"))
        let web = policy(dict(["NSAllowsArbitraryLoadsInWebContent": yes]), .ios17)
        let webReason = try #require(web.requirements(for: http("example.com")).decision?.reason)
        #expect(webReason.contains("WKWebView only, not to URLSession"))
        let ios9 = try #require(policy(nil, .ios9).requirements(for: http("printer.local")).decision?.reason)
        #expect(ios9.contains("on iOS 9 ATS applies to local hosts too"))
        let local = try #require(
            policy(dict(["NSAllowsLocalNetworking": no]), .ios17).requirements(for: http("nas.local")).decision?.reason)
        #expect(local.contains("NSAllowsLocalNetworking = NO removes the local exemption"))
        // TLS-only notes are not attached to a cleartext load.
        let media = try #require(req(policy(ConfigExample.mediaServer, .ios17), http("media-server.example.com")))
        #expect(!media.decidedBy.notes.contains { $0.contains("Cipher list") })
    }

    @Test("a fix for a host under a parent entry carries the parent's settings (a new entry replaces it)")
    func fixCarriesParentSettings() throws {
        let p = policy(
            dict([
                "NSExceptionDomains": domains([
                    "example.com": dict(["NSIncludesSubdomains": yes, "NSExceptionMinimumTLSVersion": str("TLSv1.1")]),
                    "strict.example.com": dict([:]),
                ])
            ]), .ios17)
        let v = try #require(p.requirements(for: http("api.example.com")).violation)
        #expect(v.fix.domain == "api.example.com")
        #expect(
            v.fix.keyMap == ["NSExceptionMinimumTLSVersion": str("TLSv1.1"), "NSExceptionAllowsInsecureHTTPLoads": yes])
    }

    @Test("before iOS 17 an IP literal cannot get an exception: the fix says so (§2.3)")
    func ipFixBeforeIOS17() throws {
        let v = try #require(policy(nil, .ios9).requirements(for: http("203.0.113.7")).violation)
        #expect(v.fix.isNoExceptionCanHelp)
        let modern = try #require(policy(nil, .ios17).requirements(for: http("203.0.113.7")).violation)
        #expect(modern.fix.domain == "203.0.113.7")
    }
}
