import ATSLint
import ATSPolicy
import Testing

/// One table row: lint `body` on `profile`; `rule` must fire (at `path`, with `severity`, and a message/fix
/// containing the given text) or, for negative rows, must not fire.
struct RuleCase: Sendable, CustomTestStringConvertible {
    let rule: LintRule
    let fires: Bool
    let name: String
    let body: String
    var profile: IOSProfile = .ios26
    var path: String? = nil
    var severity: LintSeverity? = nil
    var messageContains: String? = nil
    var fixContains: String? = nil

    var testDescription: String { "\(rule.rawValue) \(fires ? "+" : "-") \(name) (\(profile))" }
}

typealias F = LintFixture

let ats = "NSAppTransportSecurity"
let exc = "NSAppTransportSecurity/NSExceptionDomains"
let pins = "NSAppTransportSecurity/NSPinnedDomains"
let arbitrary = "<key>NSAllowsArbitraryLoads</key><true/>"

let positiveCases: [RuleCase] = [
    RuleCase(
        rule: .arbitraryLoads, fires: true, name: "YES", body: "<dict>\(arbitrary)</dict>",
        path: "\(ats)/NSAllowsArbitraryLoads", severity: .warning, messageContains: "App Review"),
    RuleCase(
        rule: .arbitraryLoadsIgnored, fires: true, name: "with NSAllowsLocalNetworking NO",
        body: "<dict>\(arbitrary)<key>NSAllowsLocalNetworking</key><false/></dict>", profile: .ios17,
        path: "\(ats)/NSAllowsArbitraryLoads", severity: .error, messageContains: "NSAllowsLocalNetworking is present"),
    RuleCase(
        rule: .arbitraryLoadsIgnored, fires: true, name: "with InWebContent NO",
        body: "<dict>\(arbitrary)<key>NSAllowsArbitraryLoadsInWebContent</key><false/></dict>", profile: .ios10,
        severity: .error),
    RuleCase(
        rule: .arbitraryLoadsIgnored, fires: true, name: "iOS 9 honours it, warn about iOS 10",
        body: "<dict>\(arbitrary)<key>NSAllowsArbitraryLoadsForMedia</key><true/></dict>", profile: .ios9,
        severity: .warning, messageContains: "honoured on iOS 9"),
    RuleCase(
        rule: .webOrMediaOnly, fires: true, name: "InWebContent YES",
        body: "<dict><key>NSAllowsArbitraryLoadsInWebContent</key><true/></dict>", profile: .ios14,
        path: "\(ats)/NSAllowsArbitraryLoadsInWebContent", severity: .note, messageContains: "URLSession"),
    RuleCase(
        rule: .insecureHTTPException, fires: true, name: "insecure YES with subdomains",
        body: F.domain(
            "media.example.com",
            "<key>NSExceptionAllowsInsecureHTTPLoads</key><true/><key>NSIncludesSubdomains</key><true/>"),
        path: "\(exc)/media.example.com/NSExceptionAllowsInsecureHTTPLoads", severity: .warning,
        messageContains: "all its subdomains"),
    RuleCase(
        rule: .legacyTLSVersion, fires: true, name: "TLSv1.0 on iOS 17",
        body: F.domain("old.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string>"),
        profile: .ios17, path: "\(exc)/old.example.com/NSExceptionMinimumTLSVersion", severity: .warning),
    RuleCase(
        rule: .legacyTLSRefused, fires: true, name: "TLSv1.1 on iOS 26",
        body: F.domain("old.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.1</string>"),
        path: "\(exc)/old.example.com/NSExceptionMinimumTLSVersion", severity: .error, messageContains: "no effect"),
    RuleCase(
        rule: .invalidTLSVersion, fires: true, name: "TLSv1.4",
        body: F.domain("a.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.4</string>"),
        path: "\(exc)/a.example.com/NSExceptionMinimumTLSVersion", severity: .error,
        messageContains: "default TLSv1.2 applies", fixContains: "TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3"),
    RuleCase(
        rule: .invalidTLSVersion, fires: true, name: "TLSV1.3 (case)",
        body: F.domain("a.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>TLSV1.3</string>"),
        fixContains: "write TLSv1.3"),
    RuleCase(
        rule: .invalidTLSVersion, fires: true, name: "bare 1.2",
        body: F.domain("a.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>1.2</string>"),
        fixContains: "write TLSv1.2"),
    RuleCase(
        rule: .forwardSecrecyDisabled, fires: true, name: "PFS NO",
        body: F.domain("a.example.com", "<key>NSExceptionRequiresForwardSecrecy</key><false/>"),
        path: "\(exc)/a.example.com/NSExceptionRequiresForwardSecrecy", severity: .warning),
    RuleCase(
        rule: .domainNotLowercase, fires: true, name: "Example.com",
        body: F.domain("Example.com", "<key>NSExceptionAllowsInsecureHTTPLoads</key><true/>"),
        path: "\(exc)/Example.com", severity: .error, fixContains: "example.com"),
    RuleCase(
        rule: .domainHasPort, fires: true, name: "host:443",
        body: F.domain("example.com:443", ""), path: "\(exc)/example.com:443", fixContains: "example.com"),
    RuleCase(
        rule: .domainHasPort, fires: true, name: "[::1]:8080", body: F.domain("[::1]:8080", ""), fixContains: "::1"),
    RuleCase(
        rule: .domainWildcard, fires: true, name: "*.example.com", body: F.domain("*.example.com", ""),
        path: "\(exc)/*.example.com", fixContains: "\"example.com\" with NSIncludesSubdomains"),
    RuleCase(
        rule: .domainWildcard, fires: true, name: "*.Example.com", body: F.domain("*.Example.com", ""),
        fixContains: "use \"example.com\""),
    RuleCase(
        rule: .domainSchemeOrPath, fires: true, name: "scheme", body: F.domain("https://example.com", ""),
        fixContains: "example.com"),
    RuleCase(
        rule: .domainSchemeOrPath, fires: true, name: "path", body: F.domain("example.com/api", ""),
        messageContains: "path"),
    RuleCase(
        rule: .ipKeyBeforeIOS17, fires: true, name: "IPv4 on iOS 14", body: F.domain("192.168.1.10", ""),
        profile: .ios14, path: "\(exc)/192.168.1.10", severity: .error),
    RuleCase(
        rule: .ipKeyBeforeIOS17, fires: true, name: "CIDR on iOS 10", body: F.domain("10.0.0.0/8", ""),
        profile: .ios10, messageContains: "CIDR range"),
    RuleCase(
        rule: .invalidCIDR, fires: true, name: "/33", body: F.domain("10.0.0.0/33", ""), profile: .ios17,
        path: "\(exc)/10.0.0.0/33", messageContains: "0…32"),
    RuleCase(
        rule: .invalidCIDR, fires: true, name: "scoped IPv6", body: F.domain("fe80::%lo0/10", ""), profile: .ios17),
    RuleCase(
        rule: .unknownKey, fires: true, name: "NSEExceptionDomains",
        body: "<dict><key>NSEExceptionDomains</key><dict/></dict>", path: "\(ats)/NSEExceptionDomains",
        severity: .error, messageContains: "Did you mean NSExceptionDomains?",
        fixContains: "rename NSEExceptionDomains to NSExceptionDomains"),
    RuleCase(
        rule: .unknownKey, fires: true, name: "wrong case",
        body: "<dict><key>nsallowsarbitraryloads</key><true/></dict>", messageContains: "case-sensitive"),
    RuleCase(
        rule: .unknownKey, fires: true, name: "misspelt per-domain key",
        body: F.domain("a.example.com", "<key>NSExceptionAllowInsecureHTTPLoads</key><true/>"),
        path: "\(exc)/a.example.com/NSExceptionAllowInsecureHTTPLoads",
        fixContains: "NSExceptionAllowsInsecureHTTPLoads"),
    RuleCase(
        rule: .unknownKey, fires: true, name: "misspelt per-domain key at top level",
        body: "<dict><key>NSExceptionAllowInsecureHTTPLoads</key><true/></dict>",
        messageContains: "belongs inside an exception domain"),
    RuleCase(
        rule: .unknownKey, fires: true, name: "NSExceptionAllowsLocalNetworking",
        body: F.domain("a.example.com", "<key>NSExceptionAllowsLocalNetworking</key><true/>"),
        messageContains: "does not exist"),
    RuleCase(
        rule: .unknownKey, fires: true, name: "host at top level",
        body: "<dict><key>api.example.com</key><dict/></dict>", fixContains: "into the NSExceptionDomains"),
    RuleCase(
        rule: .unknownKey, fires: true, name: "junk key", body: "<dict><key>Hello</key><true/></dict>",
        fixContains: "remove Hello"),
    RuleCase(
        rule: .misplacedKey, fires: true, name: "per-domain key at top level",
        body: "<dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>",
        path: "\(ats)/NSExceptionAllowsInsecureHTTPLoads", severity: .error,
        messageContains: "belongs inside an exception domain"),
    RuleCase(
        rule: .misplacedKey, fires: true, name: "top-level key in a domain",
        body: F.domain("a.example.com", arbitrary), path: "\(exc)/a.example.com/NSAllowsArbitraryLoads",
        messageContains: "belongs at the top level", fixContains: "NSExceptionAllowsInsecureHTTPLoads"),
    RuleCase(
        rule: .wrongType, fires: true, name: "string YES",
        body: "<dict><key>NSAllowsArbitraryLoads</key><string>YES</string></dict>",
        path: "\(ats)/NSAllowsArbitraryLoads", severity: .error, messageContains: "uses the default (NO)",
        fixContains: "<true/>"),
    RuleCase(
        rule: .wrongType, fires: true, name: "integer 1",
        body: F.domain("a.example.com", "<key>NSExceptionAllowsInsecureHTTPLoads</key><integer>1</integer>"),
        path: "\(exc)/a.example.com/NSExceptionAllowsInsecureHTTPLoads", severity: .warning,
        messageContains: "an Integer (1), not a Boolean: ATSProxy reads it as YES", fixContains: "<true/>"),
    RuleCase(
        rule: .wrongType, fires: true, name: "integer 1 is read as YES but that is unconfirmed",
        body: "<dict><key>NSAllowsArbitraryLoads</key><integer>1</integer></dict>", severity: .warning,
        messageContains: "that iOS itself always does so is unconfirmed"),
    RuleCase(
        rule: .wrongType, fires: true, name: "integer 2 is read as NO",
        body: "<dict><key>NSAllowsArbitraryLoads</key><integer>2</integer></dict>", severity: .error,
        messageContains: "reads it as NO"),
    RuleCase(
        rule: .wrongType, fires: true, name: "string NO for PFS",
        body: F.domain("a.example.com", "<key>NSExceptionRequiresForwardSecrecy</key><string>NO</string>"),
        messageContains: "uses the default (YES)", fixContains: "<false/>"),
    RuleCase(
        rule: .wrongType, fires: true, name: "exception domains as array",
        body: "<dict><key>NSExceptionDomains</key><array/></dict>", path: "\(ats)/NSExceptionDomains"),
    RuleCase(
        rule: .wrongType, fires: true, name: "domain entry as string",
        body: "<dict><key>NSExceptionDomains</key><dict><key>a.example.com</key><string>x</string></dict></dict>",
        path: "\(exc)/a.example.com", messageContains: "skips it"),
    RuleCase(
        rule: .wrongType, fires: true, name: "TLS version as real",
        body: F.domain("a.example.com", "<key>NSExceptionMinimumTLSVersion</key><real>1.2</real>"),
        messageContains: "a Real"),
    RuleCase(
        rule: .redundantEntry, fires: true, name: "child repeats parent",
        body: """
            <dict><key>NSExceptionDomains</key><dict>
            <key>example.com</key><dict><key>NSIncludesSubdomains</key><true/>
              <key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
            <key>cdn.example.com</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
            </dict></dict>
            """, path: "\(exc)/cdn.example.com", severity: .note,
        messageContains: "example.com with NSIncludesSubdomains"),
    RuleCase(
        rule: .duplicateKeyCase, fires: true, name: "Example.com and example.com",
        body: """
            <dict><key>NSExceptionDomains</key><dict>
            <key>example.com</key><dict/><key>Example.com</key><dict/>
            </dict></dict>
            """, path: "\(exc)/Example.com", severity: .warning),
    RuleCase(
        rule: .duplicateKeyCase, fires: true, name: "pinned API.example.com and api.example.com",
        body: """
            <dict><key>NSPinnedDomains</key><dict>
            <key>api.example.com</key><dict>\(F.leafPins([F.goodPin]))</dict>
            <key>API.example.com</key><dict>\(F.leafPins([F.goodPin]))</dict>
            </dict></dict>
            """, path: "\(pins)/API.example.com", messageContains: "case-insensitively"),
    RuleCase(
        rule: .reenableIncomplete, fires: true, name: "insecure YES under arbitrary loads",
        body: F.domain("api.example.com", "<key>NSExceptionAllowsInsecureHTTPLoads</key><true/>", extra: arbitrary),
        path: "\(exc)/api.example.com", severity: .warning),
    RuleCase(
        rule: .reenableIncomplete, fires: true, name: "PFS NO under arbitrary loads",
        body: F.domain("api.example.com", "<key>NSExceptionRequiresForwardSecrecy</key><false/>", extra: arbitrary),
        severity: .note, messageContains: "only partially"),
    RuleCase(
        rule: .certificateTransparencyObsolete, fires: true, name: "CT key",
        body: F.domain("a.example.com", "<key>NSRequiresCertificateTransparency</key><true/>"),
        path: "\(exc)/a.example.com/NSRequiresCertificateTransparency", severity: .warning),
    RuleCase(
        rule: .pinWithoutIdentities, fires: true, name: "only NSIncludesSubdomains",
        body: F.pinned("a.example.com", "<key>NSIncludesSubdomains</key><false/>"), path: "\(pins)/a.example.com",
        severity: .error),
    RuleCase(
        rule: .pinWithoutIdentities, fires: true, name: "empty array",
        body: F.pinned("a.example.com", "<key>NSPinnedCAIdentities</key><array/>")),
    RuleCase(
        rule: .malformedPin, fires: true, name: "too short",
        body: F.pinned("a.example.com", F.leafPins(["abc="])),
        path: "\(pins)/a.example.com/NSPinnedLeafIdentities/[0]/SPKI-SHA256-BASE64", messageContains: "2 bytes"),
    RuleCase(
        rule: .malformedPin, fires: true, name: "URL-safe alphabet",
        body: F.pinned("a.example.com", F.leafPins([String(repeating: "_", count: 43) + "="])),
        messageContains: "URL-safe"),
    RuleCase(
        rule: .malformedPin, fires: true, name: "junk with a dash is not called URL-safe",
        body: F.pinned("a.example.com", F.leafPins(["not-base64!!"])),
        messageContains: "'!' is not a base64 character"),
    RuleCase(
        rule: .malformedPin, fires: true, name: "no SPKI key",
        body: F.pinned(
            "a.example.com", "<key>NSPinnedCAIdentities</key><array><dict><key>x</key><string>y</string></dict></array>"
        ), path: "\(pins)/a.example.com/NSPinnedCAIdentities/[0]"),
    RuleCase(
        rule: .keyUnavailableOnProfile, fires: true, name: "NSAllowsLocalNetworking on iOS 9",
        body: "<dict><key>NSAllowsLocalNetworking</key><true/></dict>", profile: .ios9,
        path: "\(ats)/NSAllowsLocalNetworking", severity: .warning, messageContains: "only from iOS 10"),
    RuleCase(
        rule: .keyUnavailableOnProfile, fires: true, name: "pins on iOS 10",
        body: F.pinned("a.example.com", F.leafPins([F.goodPin])), profile: .ios10, path: pins),
    RuleCase(
        rule: .legacyKey, fires: true, name: "NSTemporaryException",
        body: F.domain("a.example.com", "<key>NSTemporaryExceptionAllowsInsecureHTTPLoads</key><true/>"),
        path: "\(exc)/a.example.com/NSTemporaryExceptionAllowsInsecureHTTPLoads", severity: .warning,
        fixContains: "rename NSTemporaryExceptionAllowsInsecureHTTPLoads to NSExceptionAllowsInsecureHTTPLoads"),
    RuleCase(
        rule: .legacyKey, fires: true, name: "NSThirdParty",
        body: F.domain("a.example.com", "<key>NSThirdPartyExceptionMinimumTLSVersion</key><string>TLSv1.0</string>"),
        fixContains: "NSExceptionMinimumTLSVersion"),
    RuleCase(
        rule: .entryHasNoEffect, fires: true, name: "empty entry without global relaxation",
        body: F.domain("api.example.com", ""), path: "\(exc)/api.example.com", severity: .note),
    RuleCase(
        rule: .pinSubdomainDepth, fires: true, name: "pinned subdomains",
        body: F.pinned("example.com", "<key>NSIncludesSubdomains</key><true/>" + F.leafPins([F.goodPin])),
        path: "\(pins)/example.com/NSIncludesSubdomains", severity: .note),
    RuleCase(
        rule: .invalidDomainKey, fires: true, name: "empty key", body: F.domain("", ""), path: "\(exc)/"),
    RuleCase(
        rule: .invalidDomainKey, fires: true, name: "non-ASCII", body: F.domain("bücher.example", ""),
        fixContains: "host name"),
    RuleCase(
        rule: .invalidDomainKey, fires: true, name: "whitespace", body: F.domain("api .example.com", "")),
    RuleCase(
        rule: .domainTrailingDot, fires: true, name: "example.com.", body: F.domain("example.com.", ""),
        path: "\(exc)/example.com.", severity: .warning),
]

let negativeCases: [RuleCase] = [
    RuleCase(
        rule: .arbitraryLoads, fires: false, name: "NO",
        body: "<dict><key>NSAllowsArbitraryLoads</key><false/></dict>"),
    RuleCase(
        rule: .arbitraryLoads, fires: false, name: "string YES is not YES",
        body: "<dict><key>NSAllowsArbitraryLoads</key><string>YES</string></dict>"),
    RuleCase(
        rule: .arbitraryLoads, fires: false, name: "silenced",
        body: "<dict>\(arbitrary)<key>NSAllowsLocalNetworking</key><true/></dict>"),
    RuleCase(rule: .arbitraryLoadsIgnored, fires: false, name: "alone", body: "<dict>\(arbitrary)</dict>"),
    RuleCase(
        rule: .webOrMediaOnly, fires: false, name: "InWebContent NO",
        body: "<dict><key>NSAllowsArbitraryLoadsInWebContent</key><false/></dict>"),
    RuleCase(
        rule: .insecureHTTPException, fires: false, name: "insecure NO",
        body: F.domain("a.example.com", "<key>NSExceptionAllowsInsecureHTTPLoads</key><false/>")),
    RuleCase(
        rule: .legacyTLSVersion, fires: false, name: "TLSv1.2",
        body: F.domain("a.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.2</string>"),
        profile: .ios17),
    RuleCase(
        rule: .legacyTLSVersion, fires: false, name: "TLSv1.0 on iOS 26 is ATS006",
        body: F.domain("a.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string>")),
    RuleCase(
        rule: .legacyTLSRefused, fires: false, name: "TLSv1.1 on iOS 17",
        body: F.domain("a.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.1</string>"),
        profile: .ios17),
    RuleCase(
        rule: .invalidTLSVersion, fires: false, name: "TLSv1.3",
        body: F.domain("a.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.3</string>")),
    RuleCase(
        rule: .forwardSecrecyDisabled, fires: false, name: "absent (default YES)",
        body: F.domain("a.example.com", "<key>NSExceptionAllowsInsecureHTTPLoads</key><true/>")),
    RuleCase(
        rule: .forwardSecrecyDisabled, fires: false, name: "YES",
        body: F.domain("a.example.com", "<key>NSExceptionRequiresForwardSecrecy</key><true/>")),
    RuleCase(rule: .domainNotLowercase, fires: false, name: "lowercase", body: F.domain("example.com", "")),
    RuleCase(
        rule: .domainHasPort, fires: false, name: "IPv6 literal", body: F.domain("2001:db8::1", ""), profile: .ios17),
    RuleCase(rule: .domainWildcard, fires: false, name: "plain host", body: F.domain("example.com", "")),
    RuleCase(rule: .domainSchemeOrPath, fires: false, name: "plain host", body: F.domain("example.com", "")),
    RuleCase(
        rule: .ipKeyBeforeIOS17, fires: false, name: "IPv4 on iOS 17", body: F.domain("192.168.1.10", ""),
        profile: .ios17),
    RuleCase(rule: .ipKeyBeforeIOS17, fires: false, name: "CIDR on iOS 26", body: F.domain("10.0.0.0/8", "")),
    RuleCase(rule: .invalidCIDR, fires: false, name: "IPv6 /32", body: F.domain("2001:db8::/32", ""), profile: .ios17),
    RuleCase(rule: .invalidCIDR, fires: false, name: "abbreviated 10/8", body: F.domain("10/8", ""), profile: .ios17),
    RuleCase(
        rule: .unknownKey, fires: false, name: "all known keys",
        body: F.domain(
            "a.example.com",
            "<key>NSIncludesSubdomains</key><true/><key>NSExceptionMinimumTLSVersion</key><string>TLSv1.2</string>",
            extra: "<key>NSAllowsLocalNetworking</key><true/>")),
    RuleCase(rule: .misplacedKey, fires: false, name: "top-level key at top level", body: "<dict>\(arbitrary)</dict>"),
    RuleCase(rule: .wrongType, fires: false, name: "real booleans", body: "<dict>\(arbitrary)</dict>"),
    RuleCase(
        rule: .redundantEntry, fires: false, name: "child re-secures",
        body: """
            <dict><key>NSExceptionDomains</key><dict>
            <key>example.com</key><dict><key>NSIncludesSubdomains</key><true/>
              <key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
            <key>secure.example.com</key><dict/>
            </dict></dict>
            """),
    RuleCase(
        rule: .redundantEntry, fires: false, name: "parent without NSIncludesSubdomains",
        body: """
            <dict><key>NSExceptionDomains</key><dict>
            <key>example.com</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
            <key>cdn.example.com</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
            </dict></dict>
            """),
    RuleCase(
        rule: .duplicateKeyCase, fires: false, name: "distinct hosts",
        body: """
            <dict><key>NSExceptionDomains</key><dict>
            <key>a.example.com</key><dict/><key>b.example.com</key><dict/>
            </dict></dict>
            """),
    RuleCase(
        rule: .reenableIncomplete, fires: false, name: "fully re-secured",
        body: F.domain(
            "api.example.com",
            "<key>NSExceptionAllowsInsecureHTTPLoads</key><false/><key>NSExceptionRequiresForwardSecrecy</key><true/>",
            extra: arbitrary)),
    RuleCase(
        rule: .reenableIncomplete, fires: false, name: "no arbitrary loads",
        body: F.domain("api.example.com", "<key>NSExceptionAllowsInsecureHTTPLoads</key><true/>")),
    RuleCase(
        rule: .certificateTransparencyObsolete, fires: false, name: "absent",
        body: F.domain("a.example.com", "<key>NSIncludesSubdomains</key><true/>")),
    RuleCase(
        rule: .pinWithoutIdentities, fires: false, name: "leaf pin",
        body: F.pinned("a.example.com", F.leafPins([F.goodPin]))),
    RuleCase(
        rule: .malformedPin, fires: false, name: "good pin", body: F.pinned("a.example.com", F.leafPins([F.goodPin]))),
    RuleCase(
        rule: .keyUnavailableOnProfile, fires: false, name: "NSAllowsLocalNetworking on iOS 10",
        body: "<dict><key>NSAllowsLocalNetworking</key><true/></dict>", profile: .ios10),
    RuleCase(
        rule: .keyUnavailableOnProfile, fires: false, name: "pins on iOS 14",
        body: F.pinned("a.example.com", F.leafPins([F.goodPin])), profile: .ios14),
    RuleCase(
        rule: .legacyKey, fires: false, name: "current key",
        body: F.domain("a.example.com", "<key>NSExceptionAllowsInsecureHTTPLoads</key><true/>")),
    RuleCase(
        rule: .entryHasNoEffect, fires: false, name: "under arbitrary loads",
        body: F.domain("api.example.com", "", extra: arbitrary)),
    RuleCase(rule: .entryHasNoEffect, fires: false, name: "local host", body: F.domain("printer.local", "")),
    RuleCase(
        rule: .entryHasNoEffect, fires: false, name: "entry already explained by another finding",
        body: F.domain("api.example.com", "<key>NSExceptionMinimumTLSVersion</key><string>TLSv1.4</string>")),
    RuleCase(rule: .entryHasNoEffect, fires: false, name: "built-in exception", body: F.domain("apple.com", "")),
    RuleCase(
        rule: .pinSubdomainDepth, fires: false, name: "NSIncludesSubdomains NO",
        body: F.pinned("example.com", "<key>NSIncludesSubdomains</key><false/>" + F.leafPins([F.goodPin]))),
    RuleCase(rule: .invalidDomainKey, fires: false, name: "good host", body: F.domain("api-2.example_x.com", "")),
    RuleCase(rule: .domainTrailingDot, fires: false, name: "no dot", body: F.domain("example.com", "")),
]
