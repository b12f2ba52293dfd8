import ATSPolicy

/// The policy a report judges: the `NSAppTransportSecurity` dictionary (nil: the app declares none, full ATS),
/// where it came from, and how to read it.
public struct ReportPolicy: Sendable {
    public var atsDictionary: PlistValue?
    /// Where the policy came from, for headings (a file path, or "Apple's defaults").
    public var source: String
    public var options: PolicyOptions

    public init(atsDictionary: PlistValue?, source: String, options: PolicyOptions) {
        self.atsDictionary = atsDictionary
        self.source = source
        self.options = options
    }

    /// The policy decoded for evaluation.
    public var decoded: ATSPolicy { ATSPolicy(atsDictionary: atsDictionary, options: options) }
}

/// `atsproxy report`: an app's ATS policy against what a capture (or a live session) observed. Pure: build it from
/// observations and a policy, then render it (`renderText`, `renderMarkdown`, `renderJSON`, and the suggestion's
/// `SuggestedPolicy.plistDocument`).
///
/// - `hosts`: every host seen, its verdict under the policy, the entry that decided, what it negotiated, and how
///   many exchanges;
/// - `missingExceptions`: hosts whose loads the app would fail, each with the narrowest fix ATSPolicy gives (the
///   fixes of `explain` and `diagnose`), or why no exception can help;
/// - `findings`: exceptions no observed host used, or broader than what was observed needed;
/// - `suggestion`: the narrowest `NSAppTransportSecurity` that lets every observed load through that an exception can
///   let through, checked by evaluating every observation (and `explain` on every URL) against it.
public struct PolicyReport: Sendable, Codable {
    /// The simulated OS release.
    public var profile: IOSProfile
    /// Where the judged policy came from.
    public var policySource: String
    /// Facts about the inputs worth saying (how the capture was made, the iOS band).
    public var notes: [String]
    /// Exchanges observed in all.
    public var exchangeCount: Int
    /// One row per host, in the order first seen.
    public var hosts: [HostReport]
    /// Hosts with loads the app would fail.
    public var missingExceptions: [MissingException]
    /// Unused and over-broad exceptions of the judged policy.
    public var findings: [PolicyFinding]
    /// The narrowest policy that lets through every observed load an exception can let through.
    public var suggestion: SuggestedPolicy
    /// What the decoder found in the judged policy (ignored keys, wrong types).
    public var policyDiagnostics: [PolicyDiagnostic]
    /// `--ats mirror` runs: what the devices did and where they disagreed with the simulation (nil: none).
    public var mirror: MirrorSection? = nil

    /// True when no observed load would fail under the policy (loads that could not be judged do not count).
    public var fits: Bool { !hosts.contains { $0.verdict == .fails } }
}

/// A load's or a host's verdict under the judged policy.
public enum LoadVerdict: String, Sendable, Hashable, Codable {
    /// The app's load would succeed.
    case allowed
    /// The app's load would fail (refused before connecting, or its handshake judged against ATS).
    case fails
    /// Not judged: the proxy tunnelled it without seeing the server's TLS, could not reach the server, or the
    /// URL could not be read.
    case notChecked
}

/// One host seen in the observations.
public struct HostReport: Sendable, Codable {
    public var host: String
    /// Worst of its loads: fails if any fails, allowed if every judged load is allowed.
    public var verdict: LoadVerdict
    /// The deciding plist key path as shown (`NSAppTransportSecurity › NSExceptionDomains › example.com`), or
    /// `ATS defaults` when no key applies.
    public var decidedBy: String
    /// Why, in one sentence (from ATSPolicy's decision order).
    public var reason: String?
    public var exchanges: Int
    /// One per origin and distinct server behaviour.
    public var loads: [LoadReport]
}

/// One observation judged.
public struct LoadReport: Sendable, Codable {
    /// The URL as observed (the first of its origin).
    public var url: String
    public var exchanges: Int
    public var verdict: LoadVerdict
    /// Every reason the load fails, with the app's error codes and the narrowest fix.
    public var violations: [ATSViolation]
    /// What the upstream handshake negotiated, when the proxy saw it.
    public var tls: TLSSummary?
    /// Why the load was not judged, or how its facts were read.
    public var note: String?
}

/// The upstream handshake in brief.
public struct TLSSummary: Sendable, Codable {
    public var version: String?
    public var cipherSuite: String?
    /// Key-exchange group (`X25519`); nil for static RSA.
    public var keyExchange: String?
    public var alpn: String?
    /// Leaf first: `good.test: RSA 2048, SHA256, until 2027-01-01`.
    public var chain: [String]
    public var trust: String
    public var hostnameMatches: Bool
    /// The app-like attempt's failure, when the facts come from the proxy's permissive probe.
    public var failure: String?
}

/// A host the app would fail, with the fix.
public struct MissingException: Sendable, Codable {
    public var host: String
    /// The failing loads' URLs.
    public var urls: [String]
    public var exchanges: Int
    /// Every distinct reason, most fundamental first per load.
    public var violations: [ATSViolation]
    /// One fix for every violation (their keys merged on the host's entry); nil when some violation has none.
    public var fix: ExceptionFix?
    /// `fix` as an XML snippet shaped for the judged policy, and where it goes.
    public var fixPlist: String?
    public var fixPasteInside: String?
    /// Why no exception can help, one reason per unfixable violation: the server must change.
    public var unfixable: [String]
}

/// An exception of the judged policy that the observations did not need, or needed less of.
public struct PolicyFinding: Sendable, Codable, Hashable {
    public enum Kind: String, Sendable, Codable, Hashable, CaseIterable {
        /// An `NSExceptionDomains` entry no observed host matched.
        case unusedEntry
        /// `NSIncludesSubdomains = YES` on an entry that matched only its own name.
        case subdomainsOnlyApex
        /// `NSIncludesSubdomains = YES` on a top-level domain or a public suffix (`com`, `co.uk`, `github.io`): the
        /// exception covers every site registered under it (`PublicSuffixes`).
        case subdomainsOfPublicSuffix
        /// `NSAllowsArbitraryLoads = YES` when at most one host it governs needed any relaxation.
        case arbitraryLoadsTooBroad
        /// `NSExceptionMinimumTLSVersion` lower than every observed server of the entry negotiates.
        case minimumTLSTooLow
        /// `NSExceptionAllowsInsecureHTTPLoads = YES` on hosts seen only over HTTPS (and not needed for their trust).
        case insecureHTTPOnlyHTTPS
    }

    public var kind: Kind
    /// The key concerned: `["NSAppTransportSecurity", "NSExceptionDomains", "example.com", "NSIncludesSubdomains"]`.
    public var keyPath: [String]
    /// What was observed.
    public var problem: String
    /// What to change.
    public var advice: String
    /// The observed hosts concerned.
    public var hosts: [String]

    public var keyPathString: String { keyPath.joined(separator: " › ") }
}
