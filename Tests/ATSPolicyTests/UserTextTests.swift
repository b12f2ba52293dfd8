import ATSPolicy
import TestSupport
import Testing

/// Users do not have the project's private ATS notes: what the policy engine writes for them (reasons, notes,
/// explanations, fixes, diagnostics; in `explain`, `diagnose`, block answers and traces) cites none of their ids.
struct UserTextTests {
    /// Keys that each bring their own reasons, notes or diagnostics.
    static let unusual = dict([
        "NSAllowsArbitraryLoads": yes,
        "NSAllowsLocalNetworking": no,
        "NSRequiresNIAPTLSPackageVersion": str("1"),
        "NSExceptionDomains": domains([
            "apple.com": dict(["NSIncludesSubdomains": yes]),
            "old.example.com": dict([
                "NSExceptionMinimumTLSVersion": str("TLSv1.0"), "NSRequiresCertificateTransparency": yes,
                "NSExceptionRequiresNIAPTLSPackageVersion": str("1"),
                "NSTemporaryExceptionAllowsInsecureHTTPLoads": yes,
            ]),
            "10.0.0.0/8": dict(["NSExceptionAllowsInsecureHTTPLoads": yes]),
        ]),
        "NSPinnedDomains": dict(["pinned.example.com": dict([:])]),
    ])
    static let policies = [
        nil, ConfigExample.mediaServer, ConfigExample.lessSecure, ConfigExample.browser, ConfigExample.chat, unusual,
    ]
    static let urls = [
        "https://api.example.com", "http://api.example.com", "https://old.example.com", "http://old.example.com",
        "https://www.apple.com", "https://10.1.2.3", "http://192.168.1.1", "http://printer.local",
        "https://media-server.example.com", "http://update.hosted-chat.example", "https://[::1]:8443",
    ]

    @Test("explain, as text and JSON, for every profile and the options' readings", arguments: IOSProfile.allCases)
    func explain(profile: IOSProfile) throws {
        let readings = [
            PolicyOptions(legacyKeys: .always, userRootEKU: .sourceLenient, privateAddressesAreLocal: true),
            PolicyOptions(legacyKeys: .never, userRootEKU: .documentedStrict, privateAddressesAreLocal: false),
        ]
        for ats in Self.policies {
            for options in readings {
                let report = ExplainReport(policy: policy(ats, profile, options: options), urls: Self.urls, source: "p")
                let text = report.renderText() + (try report.renderJSON())
                #expect(PrivateReferenceIDs.found(in: text) == [], "\(text)")
            }
        }
    }

    @Test("The error codes' notes, for every kind of violation on every profile")
    func errorCodeNotes() {
        for profile in IOSProfile.allCases {
            for kind in ViolationKind.allCases {
                let note = kind.errorCodes(on: profile).note ?? ""
                #expect(PrivateReferenceIDs.found(in: note) == [], "\(kind) on \(profile): \(note)")
            }
        }
    }

    @Test("Verdicts' explanations, fixes and notes for weak, EKU-less and unprobed handshakes")
    func verdicts() throws {
        for profile in IOSProfile.allCases {
            for reading in [UserRootEKUReading.sourceLenient, .documentedStrict] {
                let p = policy(nil, profile, options: PolicyOptions(userRootEKU: reading))
                let r = try #require(req(p, https("api.example.com")))
                let chains = [
                    [cert(bits: 1024), caCert()], [cert(hash: .sha1), caCert()], [cert(ekus: nil), caCert()],
                    [cert(ekus: ["1.3.6.1.5.5.7.3.2"]), caCert()],
                ]
                var facts = chains.map {
                    handshake(version: .tls12, suite: 0xC02F, chain: $0, trust: .trustedByUserRoot)
                }
                facts.append(failedHandshake(.alertReceived(70), versions: [], preferred: nil, forwardSecret: true))
                for f in facts {
                    let text = p.evaluate(f, against: r).violations.map { "\($0)" }.joined(separator: "\n")
                    #expect(PrivateReferenceIDs.found(in: text) == [], "\(profile): \(text)")
                }
            }
        }
    }
}
