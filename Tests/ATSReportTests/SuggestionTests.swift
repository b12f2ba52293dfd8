import ATSPolicy
import Foundation
import PolicyLoader
import Testing

@testable import ATSReport

@Suite("report: the suggested policy")
struct SuggestionTests {
    let mixed: [Observation] = [
        https("api.example.com", exchanges: 10),
        https("legacy.example.com", probed("legacy.example.com", version: .tls10, suite: ecdheCBC), exchanges: 2),
        // TLS 1.0 without forward secrecy: two keys, the second found only once the first is in place.
        https("ancient.example.com", probed("ancient.example.com", version: .tls10, suite: staticRSACBC)),
        https("rsa.example.com", completed("rsa.example.com", version: .tls12, suite: staticRSAGCM)),
        http("media.example.com", exchanges: 4),
        https("wrong.example.com", completed("wrong.example.com", hostnameMatches: false)),
    ]

    @Test("Exact-host entries with only the keys each needs, each key with its reason; unfixable hosts left out")
    func entries() throws {
        let s = report(mixed).suggestion
        let byDomain = Dictionary(uniqueKeysWithValues: s.entries.map { ($0.domain, $0) })
        #expect(Set(byDomain.keys) == ["legacy.example.com", "ancient.example.com", "rsa.example.com", "media.example.com"])
        func keys(_ d: String) -> [String: PlistValue] {
            Dictionary(uniqueKeysWithValues: (byDomain[d]?.keys ?? []).map { ($0.key, $0.value) })
        }
        #expect(keys("legacy.example.com") == ["NSExceptionMinimumTLSVersion": .string("TLSv1.0")])
        #expect(
            keys("ancient.example.com")
                == ["NSExceptionMinimumTLSVersion": .string("TLSv1.0"), "NSExceptionRequiresForwardSecrecy": no])
        #expect(keys("rsa.example.com") == ["NSExceptionRequiresForwardSecrecy": no])
        #expect(keys("media.example.com") == ["NSExceptionAllowsInsecureHTTPLoads": yes])
        for entry in s.entries {
            for k in entry.keys { #expect(k.reasons.allSatisfy { $0.hasPrefix(entry.domain + ": ") }, "\(k)") }
        }
        #expect(s.unfixable.map(\.host) == ["wrong.example.com"])
        #expect(s.verified)
        #expect(s.checks.count == 5)
    }

    @Test("The fragment loads back (as `explain --plist` would) and every fixable load then passes")
    func roundTrip() throws {
        let first = report(mixed)
        let document = first.suggestion.plistDocument
        let loaded = try PolicyLoader.decode(Array(document.utf8), source: "suggested.plist")
        #expect(loaded.isWholeInfoPlist)
        #expect(sortedKeys(loaded.atsDictionary) == sortedKeys(first.suggestion.atsDictionary))
        let again = report(mixed, loaded.atsDictionary)
        #expect(again.missingExceptions.map(\.host) == ["wrong.example.com"])
        #expect(again.findings.isEmpty, "\(again.findings)")
        let explain = ExplainReport(
            policy: ATSPolicy(atsDictionary: loaded.atsDictionary, options: PolicyOptions(profile: .ios17)),
            urls: first.suggestion.checks.map(\.url), source: "suggested.plist")
        #expect(!explain.anyBlocked)
    }

    @Test("Each key is commented with the hosts that need it; `--` in a host name cannot break the comment")
    func comments() throws {
        let s = report([http("xn--bcher-kva.example"), http("xn--bcher-kva.example")]).suggestion
        let fragment = s.plistFragment()
        #expect(fragment.hasPrefix("<key>NSAppTransportSecurity</key>"))
        #expect(fragment.contains("<!-- xn- -bcher-kva.example: cleartext http:// load"))
        let comments = fragment.split(separator: "\n").filter { $0.contains("<!--") }
        for c in comments {
            let inner = c.components(separatedBy: "<!--")[1].components(separatedBy: "-->")[0]
            #expect(!inner.contains("--"), "\(c)")
        }
        #expect(
            sortedKeys(try PolicyLoader.decode(Array(s.plistDocument.utf8), source: "s.plist").atsDictionary)
                == sortedKeys(s.atsDictionary))
    }

    @Test("The check's summary counts the loads it checked: none, one, several")
    func checkSummary() {
        let wrong = https("wrong.example.com", completed("wrong.example.com", hostnameMatches: false))
        #expect(report([wrong]).suggestionCheckText == "nothing to check: no observed load is one an exception can let through")
        #expect(
            report([https("api.example.com"), wrong]).suggestionCheckText
                == "checked: the 1 load an exception can let through passes with it, and explain does not refuse it")
        #expect(
            report(mixed).suggestionCheckText
                == "checked: the 5 loads an exception can let through all pass with it, and explain refuses none")
    }

    @Test("Nothing needed: an empty dictionary, said in a comment; pins of the judged policy are kept")
    func emptyAndPins() throws {
        let fine = report([https("api.example.com")]).suggestion.plistFragment()
        #expect(fine.contains("<dict/>"))
        #expect(fine.contains("Apple's defaults let every observed load through"))
        // A load no key can help fails whatever the plist says: the comment must not claim every load passes.
        let withUnfixable = report([
            https("api.example.com"), https("wrong.example.com", completed("wrong.example.com", hostnameMatches: false)),
        ]).suggestion.plistFragment()
        #expect(withUnfixable.contains("<dict/>"))
        #expect(!withUnfixable.contains("every observed load through"), "\(withUnfixable)")
        #expect(withUnfixable.contains("every observed load that a key could help"), "\(withUnfixable)")
        let pins = dict([
            "api.example.com": dict([
                "NSPinnedLeafIdentities": .array([dict(["SPKI-SHA256-BASE64": .string("LEAFLEAFLEAFLEAFLEAFLEAFLEAFLEAFLEAFLEAFLEA=")])])
            ])
        ])
        let s = report([https("api.example.com")], dict(["NSPinnedDomains": pins])).suggestion
        #expect(s.atsDictionary.dictionaryValue?["NSPinnedDomains"] == pins)
        #expect(s.plistFragment().contains("pins only tighten"))
        #expect(s.verified)
    }
}

/// `value` with every dictionary's keys sorted, as PolicyLoader returns them.
private func sortedKeys(_ value: PlistValue?) -> PlistValue? {
    guard let value else { return nil }
    switch value {
    case .dictionary(let d):
        return .dictionary(
            PlistDictionary(d.entries.sorted { $0.key < $1.key }.map { ($0.key, sortedKeys($0.value) ?? $0.value) }))
    case .array(let items): return .array(items.map { sortedKeys($0) ?? $0 })
    default: return value
    }
}
