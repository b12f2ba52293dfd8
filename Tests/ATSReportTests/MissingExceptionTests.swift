import ATSPolicy
import Testing

@testable import ATSReport

@Suite("report: hosts and missing exceptions")
struct MissingExceptionTests {
    @Test("A host that passes: verdict ok, decided by ATS defaults, its TLS and exchange count shown")
    func allowedHost() throws {
        let r = report([https("api.example.com", exchanges: 5)])
        #expect(r.fits)
        let host = try #require(r.hosts.first)
        #expect(host.verdict == .allowed && host.exchanges == 5 && host.decidedBy == "ATS defaults")
        let tls = try #require(host.loads.first?.tls)
        #expect(tls.version == "TLSv1.3" && tls.cipherSuite == "TLS_AES_128_GCM_SHA256" && tls.keyExchange == "X25519")
        #expect(tls.chain.first?.hasPrefix("api.example.com: RSA 2048, SHA256") == true)
        #expect(r.missingExceptions.isEmpty && r.findings.isEmpty && r.suggestion.entries.isEmpty)
    }

    @Test("A TLS 1.0-only server (the app-like handshake failed, the probe completed): the minimum-version fix")
    func legacyServer() throws {
        let r = report([https("legacy.example.com", probed("legacy.example.com", version: .tls10, suite: ecdheCBC))])
        #expect(!r.fits)
        let missing = try #require(r.missingExceptions.first)
        #expect(missing.host == "legacy.example.com")
        #expect(missing.violations.map(\.kind) == [.tlsVersionTooLow])
        #expect(
            missing.fix == .setKeys(
                domain: "legacy.example.com",
                keys: [FixKey(key: "NSExceptionMinimumTLSVersion", value: .string("TLSv1.0"))]))
        #expect(missing.fixPlist?.contains("<string>TLSv1.0</string>") == true)
        #expect(r.hosts.first?.loads.first?.note?.contains("permissive probe") == true)
    }

    @Test("The same server on iOS 26: no exception can help, the server must change")
    func legacyServerOnIOS26() throws {
        let r = report(
            [https("legacy.example.com", probed("legacy.example.com", version: .tls10, suite: ecdheCBC))], ios: .ios26)
        let missing = try #require(r.missingExceptions.first)
        #expect(missing.fix == nil)
        #expect(missing.unfixable.first?.contains("TLS 1.2") == true)
        #expect(r.suggestion.unfixable.map(\.host) == ["legacy.example.com"])
        #expect(r.suggestion.entries.isEmpty)
    }

    @Test("Cleartext http:// under full ATS: refused with -1022, fixed by NSExceptionAllowsInsecureHTTPLoads")
    func cleartext() throws {
        let r = report([http("media.example.com", exchanges: 3)])
        let missing = try #require(r.missingExceptions.first)
        #expect(missing.violations.first?.urlError.code == -1022)
        #expect(missing.exchanges == 3)
        #expect(
            missing.fix == .setKeys(
                domain: "media.example.com", keys: [FixKey(key: "NSExceptionAllowsInsecureHTTPLoads", value: .bool(true))]))
    }

    @Test("A name mismatch and a server that refuses every handshake: no exception can help")
    func unfixable() throws {
        let r = report([
            https("wrong.example.com", completed("wrong.example.com", hostnameMatches: false)),
            https("dead.example.com", refused("dead.example.com")),
        ])
        #expect(r.missingExceptions.count == 2)
        for m in r.missingExceptions {
            #expect(m.fix == nil, "\(m.host)")
            #expect(!m.unfixable.isEmpty)
        }
        #expect(r.missingExceptions[1].unfixable.first?.contains("permissive probe") == true)
        #expect(r.suggestion.unfixable.count == 2)
        #expect(r.renderText().contains("No exception can help: fix the server."))
    }

    @Test("A fix under an existing parent entry carries the parent's keys over to the new exact entry")
    func fixUnderParent() throws {
        let ats = exceptions(["example.com": dict(["NSIncludesSubdomains": yes, "NSExceptionAllowsInsecureHTTPLoads": yes])])
        let r = report([https("legacy.example.com", probed("legacy.example.com", version: .tls10, suite: ecdheCBC))], ats)
        let fix = try #require(r.missingExceptions.first?.fix)
        guard case .setKeys(let domain, let keys) = fix else { throw Failure("no keys") }
        #expect(domain == "legacy.example.com")
        #expect(keys.map(\.key).contains("NSExceptionAllowsInsecureHTTPLoads"))
        #expect(keys.contains(FixKey(key: "NSExceptionMinimumTLSVersion", value: .string("TLSv1.0"))))
        #expect(r.hosts.first?.decidedBy == "NSAppTransportSecurity › NSExceptionDomains › example.com")
    }

    @Test("Tunnelled and unreachable loads are listed but not judged, and do not make the policy fail")
    func notChecked() {
        let r = report([
            Observation(url: "https://pinned.example.com:443", carriage: .tunnelled),
            Observation(url: "https://gone.example.com/", carriage: .unreachable),
        ])
        #expect(r.fits)
        #expect(r.hosts.map(\.verdict) == [.notChecked, .notChecked])
    }
}

struct Failure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}
