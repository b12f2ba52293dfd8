/// An app's App Transport Security policy, decoded from its `NSAppTransportSecurity` dictionary and read the way
/// the simulated iOS release reads it (reference §1–§4).
///
/// Build it once per app and profile, then ask `requirements(for:)` before a connection and
/// `evaluate(_:against:)` after the handshake.
public struct ATSPolicy: Sendable, Hashable {
    /// The profile and readings the policy was decoded with.
    public let options: PolicyOptions
    /// False when the Info.plist had no `NSAppTransportSecurity` at all (full ATS).
    public let isDeclared: Bool

    /// Global keys, after type checks; nil = absent (or ignored for a wrong type, or unknown to the profile).
    public let allowsArbitraryLoads: Bool?
    /// `NSAllowsArbitraryLoadsForMedia` (iOS 10+).
    public let allowsArbitraryLoadsForMedia: Bool?
    /// `NSAllowsArbitraryLoadsInWebContent` (iOS 10+).
    public let allowsArbitraryLoadsInWebContent: Bool?
    /// `NSAllowsLocalNetworking` (iOS 10+); present YES or NO silences NSAllowsArbitraryLoads.
    public let allowsLocalNetworking: Bool?
    /// `NSRequiresNIAPTLSPackageVersion`, read but not simulated.
    public let requiresNIAPTLSPackageVersion: String?

    /// Usable exception entries: built-ins first (unless an app entry replaced them), then the app's, in file
    /// order.
    public let exceptionDomains: [ExceptionDomainEntry]
    /// `NSPinnedDomains` entries in effect (iOS 14+).
    public let pinnedDomains: [PinnedDomainEntry]
    /// Everything the decoder ignored, rejected or found worth saying.
    public let diagnostics: [PolicyDiagnostic]

    init(
        options: PolicyOptions, isDeclared: Bool, allowsArbitraryLoads: Bool?, allowsArbitraryLoadsForMedia: Bool?,
        allowsArbitraryLoadsInWebContent: Bool?, allowsLocalNetworking: Bool?, requiresNIAPTLSPackageVersion: String?,
        exceptionDomains: [ExceptionDomainEntry], pinnedDomains: [PinnedDomainEntry], diagnostics: [PolicyDiagnostic]
    ) {
        self.options = options
        self.isDeclared = isDeclared
        self.allowsArbitraryLoads = allowsArbitraryLoads
        self.allowsArbitraryLoadsForMedia = allowsArbitraryLoadsForMedia
        self.allowsArbitraryLoadsInWebContent = allowsArbitraryLoadsInWebContent
        self.allowsLocalNetworking = allowsLocalNetworking
        self.requiresNIAPTLSPackageVersion = requiresNIAPTLSPackageVersion
        self.exceptionDomains = exceptionDomains
        self.pinnedDomains = pinnedDomains
        self.diagnostics = diagnostics
    }

    /// The simulated OS release.
    public var profile: IOSProfile { options.profile }
}

/// One `NSExceptionDomains` entry, with every key resolved to its effective value.
public struct ExceptionDomainEntry: Sendable, Hashable, Codable {
    /// What the key names.
    public enum Kind: Sendable, Hashable, Codable {
        case dnsName
        case ipAddress(IPAddress)
        case cidr(CIDRRange)
        /// Contains `/` but is not valid CIDR: Apple keeps it but it can never match (src S1).
        case invalidCIDR
    }

    /// Whether the entry came from the app or from Apple.
    public enum Origin: String, Sendable, Hashable, Codable {
        /// From the app's Info.plist.
        case app
        /// Apple's built-in system exception (reference §2.1 row 9).
        case builtIn
    }

    /// The key exactly as written.
    public var key: String
    /// Host name, IP literal or CIDR range.
    public var kind: Kind
    /// App entry or built-in.
    public var origin: Origin
    /// `NSIncludesSubdomains` (default NO).
    public var includesSubdomains: Bool
    /// `NSExceptionAllowsInsecureHTTPLoads` (default NO).
    public var allowsInsecureHTTPLoads: Bool
    /// nil: the key was absent or unusable, so the ATS default TLS 1.2 applies.
    public var minimumTLSVersion: TLSVersion?
    /// `NSExceptionRequiresForwardSecrecy` (default YES).
    public var requiresForwardSecrecy: Bool
    /// `NSRequiresCertificateTransparency` (default NO; obsolete).
    public var requiresCertificateTransparency: Bool
    /// `NSExceptionRequiresNIAPTLSPackageVersion`, read but not simulated.
    public var requiresNIAPTLSPackageVersion: String?
    /// The keys that set a non-default value, with the value, as the plist spelled them (legacy keys included).
    /// Used to carry an entry's settings over when a fix must create a narrower entry.
    public var effectiveKeys: [FixKey]
    /// Legacy `NSThirdParty*` / `NSTemporary*` keys whose value took effect (see `PolicyOptions.legacyKeys`).
    public var honouredLegacyKeys: [String] = []

    /// An entry with ATS defaults for every key not given.
    public init(
        key: String, kind: Kind, origin: Origin, includesSubdomains: Bool = false,
        allowsInsecureHTTPLoads: Bool = false, minimumTLSVersion: TLSVersion? = nil,
        requiresForwardSecrecy: Bool = true, requiresCertificateTransparency: Bool = false,
        requiresNIAPTLSPackageVersion: String? = nil, effectiveKeys: [FixKey] = []
    ) {
        self.key = key
        self.kind = kind
        self.origin = origin
        self.includesSubdomains = includesSubdomains
        self.allowsInsecureHTTPLoads = allowsInsecureHTTPLoads
        self.minimumTLSVersion = minimumTLSVersion
        self.requiresForwardSecrecy = requiresForwardSecrecy
        self.requiresCertificateTransparency = requiresCertificateTransparency
        self.requiresNIAPTLSPackageVersion = requiresNIAPTLSPackageVersion
        self.effectiveKeys = effectiveKeys
    }

    /// The key path a decision or diagnostic names.
    public var keyPath: [String] {
        origin == .app
            ? ["NSAppTransportSecurity", "NSExceptionDomains", key]
            : ["built-in system exceptions", key]
    }

    /// `NSIncludesSubdomains = YES, NSExceptionAllowsInsecureHTTPLoads = YES` (non-default settings only), or
    /// `no keys (full ATS)`.
    public var settingsSummary: String {
        var parts: [String] = []
        if includesSubdomains { parts.append("NSIncludesSubdomains = YES") }
        if allowsInsecureHTTPLoads { parts.append("NSExceptionAllowsInsecureHTTPLoads = YES") }
        if let v = minimumTLSVersion, v != .tls12 { parts.append("NSExceptionMinimumTLSVersion = \(v.plistName)") }
        if !requiresForwardSecrecy { parts.append("NSExceptionRequiresForwardSecrecy = NO") }
        if requiresCertificateTransparency { parts.append("NSRequiresCertificateTransparency = YES") }
        return parts.isEmpty ? "no relaxing keys, so full ATS" : parts.joined(separator: ", ")
    }
}

/// One `NSPinnedDomains` entry (iOS 14+, reference §1.3).
public struct PinnedDomainEntry: Sendable, Hashable, Codable {
    /// The key, lowercased (pinned domains compare case-insensitively, src S7).
    public var domain: String
    /// Also pins hosts exactly one label below `domain`.
    public var includesSubdomains: Bool
    /// `NSPinnedLeafIdentities` digests.
    public var leafSPKISHA256: [String]
    /// `NSPinnedCAIdentities` digests.
    public var caSPKISHA256: [String]

    /// A pinned domain with its SPKI-SHA256-BASE64 digests.
    public init(domain: String, includesSubdomains: Bool, leafSPKISHA256: [String], caSPKISHA256: [String]) {
        self.domain = domain
        self.includesSubdomains = includesSubdomains
        self.leafSPKISHA256 = leafSPKISHA256
        self.caSPKISHA256 = caSPKISHA256
    }
}
