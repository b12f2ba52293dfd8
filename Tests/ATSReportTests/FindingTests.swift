import ATSPolicy
import Testing

@testable import ATSReport

@Suite("report: unused and over-broad exceptions")
struct FindingTests {
    private func kinds(_ r: PolicyReport) -> [PolicyFinding.Kind] { r.findings.map(\.kind) }

    @Test("An entry no observed host matched is unused; one passed over for lack of NSIncludesSubdomains says so")
    func unusedEntry() throws {
        let ats = exceptions(["old.example.net": dict([:]), "example.com": dict(["NSExceptionAllowsInsecureHTTPLoads": yes])])
        let r = report([https("api.example.com")], ats)
        #expect(kinds(r) == [.unusedEntry, .unusedEntry])
        let passed = try #require(r.findings.first { $0.keyPath.last == "example.com" })
        #expect(passed.problem.contains("passed over for api.example.com"))
        #expect(passed.hosts == ["api.example.com"])
    }

    @Test("NSIncludesSubdomains that matched only the apex is over-broad; a subdomain seen makes it needed")
    func subdomainsOnlyApex() throws {
        let ats = exceptions(["example.com": dict(["NSIncludesSubdomains": yes])])
        let apexOnly = report([https("example.com")], ats)
        #expect(kinds(apexOnly) == [.subdomainsOnlyApex])
        #expect(apexOnly.findings.first?.keyPath.last == "NSIncludesSubdomains")
        let withSub = report([https("example.com"), https("cdn.example.com")], ats)
        #expect(kinds(withSub).isEmpty)
    }

    @Test("NSIncludesSubdomains on a top-level domain or a public suffix is flagged, used or not; on the app's domain it is not",
          arguments: ["com", "co.uk", "github.io", "herokuapp.com"])
    func subdomainsOfPublicSuffix(suffix: String) throws {
        let ats = exceptions([suffix: dict(["NSIncludesSubdomains": yes]), "example.org": dict(["NSIncludesSubdomains": yes])])
        let seen = "api.myapp.\(suffix)"
        let r = report([https(seen), https("example.org"), https("cdn.example.org")], ats)
        let flagged = r.findings.filter { $0.kind == .subdomainsOfPublicSuffix }
        #expect(flagged.map { $0.keyPath.dropLast().last } == [suffix], "\(r.findings)")
        let finding = try #require(flagged.first)
        #expect(finding.keyPath.last == "NSIncludesSubdomains")
        #expect(finding.problem.contains(suffix.contains(".") ? "a public suffix" : "a whole top-level domain"))
        #expect(finding.hosts == [seen] && finding.advice.contains(seen))
        #expect(r.renderText(colour: false).contains("NSIncludesSubdomains on a public suffix"))
        #expect(r.renderMarkdown().contains("NSIncludesSubdomains on a public suffix"))
        // Unused, it is flagged all the same (and unused).
        let unused = report([https("example.org")], exceptions([suffix: dict(["NSIncludesSubdomains": yes])]))
        #expect(kinds(unused).contains(.subdomainsOfPublicSuffix) && kinds(unused).contains(.unusedEntry))
    }

    @Test("localhost, local and names not on the built-in list are not public suffixes")
    func notPublicSuffixes() {
        for name in ["localhost", "local", "example.com", "myapp.co.uk", "a.github.io", "amazonaws.com"] {
            #expect(PublicSuffixes.kind(of: name) == nil, "\(name)")
        }
        #expect(PublicSuffixes.kind(of: "com.") == "a whole top-level domain")
    }

    @Test("NSAllowsArbitraryLoads when only one host needed anything: replace it with that host's exception")
    func arbitraryLoadsForOneHost() throws {
        let ats = dict(["NSAllowsArbitraryLoads": yes])
        let one = report(
            [https("api.example.com"), https("legacy.example.com", probed("legacy.example.com", version: .tls10, suite: ecdheCBC))],
            ats)
        #expect(one.fits)
        let finding = try #require(one.findings.first)
        #expect(finding.kind == .arbitraryLoadsTooBroad && finding.hosts == ["legacy.example.com"])
        #expect(finding.advice.contains("NSExceptionMinimumTLSVersion = TLSv1.0"))
        let none = report([https("api.example.com")], ats)
        #expect(kinds(none) == [.arbitraryLoadsTooBroad])
        #expect(none.findings.first?.advice == "remove NSAllowsArbitraryLoads")
        let two = report(
            [http("media.example.com"), https("legacy.example.com", probed("legacy.example.com", version: .tls10, suite: ecdheCBC))],
            ats)
        #expect(kinds(two).isEmpty, "two hosts needed it: \(two.findings)")
        // Silenced by NSAllowsLocalNetworking (iOS 10+): not in effect, so not judged here (lint and explain say so).
        let silenced = report([https("api.example.com")], dict(["NSAllowsArbitraryLoads": yes, "NSAllowsLocalNetworking": yes]))
        #expect(kinds(silenced).isEmpty)
    }

    @Test("A minimum TLS version lower than any observed server of the entry needs")
    func minimumTLSTooLow() throws {
        let ats = exceptions([
            "api.example.com": dict(["NSExceptionMinimumTLSVersion": .string("TLSv1.0")]),
            "legacy.example.com": dict(["NSExceptionMinimumTLSVersion": .string("TLSv1.0")]),
            "mid.example.com": dict(["NSExceptionMinimumTLSVersion": .string("TLSv1.0")]),
        ])
        let r = report(
            [
                https("api.example.com", completed("api.example.com", version: .tls12, suite: 0xC02F)),
                https("legacy.example.com", completed("legacy.example.com", version: .tls10, suite: ecdheCBC)),
                https("mid.example.com", completed("mid.example.com", version: .tls11, suite: ecdheCBC)),
            ], ats)
        #expect(r.fits)
        #expect(kinds(r) == [.minimumTLSTooLow, .minimumTLSTooLow])
        #expect(r.findings[0].keyPath == ["NSAppTransportSecurity", "NSExceptionDomains", "api.example.com", "NSExceptionMinimumTLSVersion"])
        #expect(r.findings[0].advice.hasPrefix("remove NSExceptionMinimumTLSVersion"))
        #expect(r.findings[1].advice == "raise NSExceptionMinimumTLSVersion to TLSv1.1")
    }

    @Test("NSExceptionAllowsInsecureHTTPLoads on a host seen only over HTTPS; not when it was loaded over http://")
    func insecureHTTPOnlyHTTPS() throws {
        let ats = exceptions([
            "api.example.com": dict(["NSExceptionAllowsInsecureHTTPLoads": yes]),
            "media.example.com": dict(["NSExceptionAllowsInsecureHTTPLoads": yes]),
        ])
        let r = report([https("api.example.com"), http("media.example.com"), https("media.example.com")], ats)
        #expect(kinds(r) == [.insecureHTTPOnlyHTTPS])
        #expect(r.findings.first?.hosts == ["api.example.com"])
    }

    @Test("NSExceptionAllowsInsecureHTTPLoads is not over-broad when the HTTPS load needs its trust relaxation (iOS 10)")
    func insecureHTTPNeededForTrust() throws {
        let ats = exceptions(["weak.example.com": dict(["NSExceptionAllowsInsecureHTTPLoads": yes])])
        let facts = completed("weak.example.com", version: .tls12, suite: 0xC02F, bits: 1024)
        let r = report([https("weak.example.com", facts)], ats, ios: .ios10)
        #expect(r.fits)
        #expect(kinds(r).isEmpty, "\(r.findings)")
        // Without the key the 1024-bit leaf fails ATS's key-size minimum: the report says so.
        let strict = report([https("weak.example.com", facts)], ios: .ios10)
        #expect(strict.missingExceptions.first?.violations.first?.kind == .weakKey)
    }
}
