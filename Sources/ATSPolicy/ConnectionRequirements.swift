/// A connection the app is about to make: `scheme://host:port`.
public struct ConnectionTarget: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Lowercased scheme: `https`, `http`, `wss`, `ws`.
    public var scheme: String
    /// The host exactly as the URL names it (no brackets around IPv6).
    public var host: String
    public var port: Int

    public init(scheme: String, host: String, port: Int? = nil) {
        self.scheme = scheme.lowercased()
        self.host = host
        self.port = port ?? (["https", "wss"].contains(self.scheme) ? 443 : 80)
    }

    /// True for `https` and `wss`.
    public var isSecure: Bool { scheme == "https" || scheme == "wss" }

    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(scheme)://\(h):\(port)"
    }
}

/// Which plist entry decided a connection's policy, and why, in plain words.
public struct PolicyDecision: Sendable, Hashable, Codable {
    /// Key path of the deciding entry, e.g. `["NSAppTransportSecurity", "NSExceptionDomains", "example.com"]`;
    /// empty when no key applied and ATS defaults govern.
    public var keyPath: [String]
    /// One sentence: "exception entry `example.com` (NSIncludesSubdomains = YES) covers api.example.com".
    public var reason: String
    /// Choices made where the reference is unconfirmed, with their source, shown by `explain`.
    public var notes: [String]

    public init(keyPath: [String], reason: String, notes: [String] = []) {
        self.keyPath = keyPath
        self.reason = reason
        self.notes = notes
    }

    /// `NSAppTransportSecurity › NSExceptionDomains › example.com`.
    public var keyPathString: String { keyPath.joined(separator: " › ") }
}

/// Certificate checks that apply to a connection (reference §3.3–§3.5).
public struct CertificateRules: Sendable, Hashable, Codable {
    public var minimumRSABits: Int
    public var minimumECBits: Int
    /// SHA-2 signatures required on leaf and intermediates (not on self-signed roots).
    public var requiresSHA2: Bool
    /// Leaf must name the host in its SAN (CN ignored).
    public var requiresSANMatch: Bool
    /// Leaf must carry id-kp-serverAuth.
    public var requiresServerAuthEKU: Bool
    /// Maximum leaf lifetime in days for chains to a system root (398) and to a user root (825).
    public var maximumValidityDaysSystemRoot: Int
    public var maximumValidityDaysUserRoot: Int
    /// `NSRequiresCertificateTransparency = YES` on the matching entry (obsolete; see reference §3.5).
    public var requiresCertificateTransparency: Bool
    /// The iOS 13 lifetime limits (825 / 398 days) are checked; false on profiles before iOS 13.
    public var enforcesValidityLimits: Bool
    /// serverAuth EKU required on the leaf even when the chain ends in a user-installed root (the documented
    /// reading); false = Apple's source reading, where only an EKU extension that is present must allow serverAuth.
    public var requiresServerAuthEKUUnderUserRoot: Bool

    public init(
        minimumRSABits: Int = 2048, minimumECBits: Int = 256, requiresSHA2: Bool = true,
        requiresSANMatch: Bool = true, requiresServerAuthEKU: Bool = true, maximumValidityDaysSystemRoot: Int = 398,
        maximumValidityDaysUserRoot: Int = 825, requiresCertificateTransparency: Bool = false,
        enforcesValidityLimits: Bool = true, requiresServerAuthEKUUnderUserRoot: Bool = false
    ) {
        self.enforcesValidityLimits = enforcesValidityLimits
        self.requiresServerAuthEKUUnderUserRoot = requiresServerAuthEKUUnderUserRoot
        self.minimumRSABits = minimumRSABits
        self.minimumECBits = minimumECBits
        self.requiresSHA2 = requiresSHA2
        self.requiresSANMatch = requiresSANMatch
        self.requiresServerAuthEKU = requiresServerAuthEKU
        self.maximumValidityDaysSystemRoot = maximumValidityDaysSystemRoot
        self.maximumValidityDaysUserRoot = maximumValidityDaysUserRoot
        self.requiresCertificateTransparency = requiresCertificateTransparency
    }
}

/// `NSPinnedDomains` pins that apply to a host.
public struct PinSet: Sendable, Hashable, Codable {
    /// The pinned-domain key that matched.
    public var domain: String
    public var leafSPKISHA256: [String]
    public var caSPKISHA256: [String]

    public init(domain: String, leafSPKISHA256: [String], caSPKISHA256: [String]) {
        self.domain = domain
        self.leafSPKISHA256 = leafSPKISHA256
        self.caSPKISHA256 = caSPKISHA256
    }
}

/// What the policy demands of one connection before it is made. Drives the upstream ClientHello (TLSCore) and
/// the post-handshake evaluation.
public struct ConnectionRequirements: Sendable, Hashable, Codable {
    public var target: ConnectionTarget
    public var profile: IOSProfile
    /// `http://` (cleartext) loads allowed to this host.
    public var allowsCleartext: Bool
    /// The extended ATS checks apply (TLS minimum, forward secrecy, ATS certificate minimums). False under
    /// `NSAllowsArbitraryLoads` or `NSExceptionAllowsInsecureHTTPLoads`; default trust still applies then.
    public var atsEnforced: Bool
    public var minimumTLSVersion: TLSVersion
    /// Versions the simulated client offers, lowest first (profile limits: no TLS 1.3 before iOS 12.2,
    /// none below 1.2 on iOS 26).
    public var offeredVersions: [TLSVersion]
    public var requiresForwardSecrecy: Bool
    /// The exact suites the client offers, in order; nil when Apple sets no ATS list (the stack's default list:
    /// insecure HTTP allowed and forward secrecy off, src S1).
    public var offeredCipherSuites: [CipherSuite]?
    public var certificateRules: CertificateRules
    public var pins: PinSet?
    public var decidedBy: PolicyDecision

    public init(
        target: ConnectionTarget, profile: IOSProfile, allowsCleartext: Bool, atsEnforced: Bool,
        minimumTLSVersion: TLSVersion, offeredVersions: [TLSVersion], requiresForwardSecrecy: Bool,
        offeredCipherSuites: [CipherSuite]?, certificateRules: CertificateRules, pins: PinSet?,
        decidedBy: PolicyDecision
    ) {
        self.target = target
        self.profile = profile
        self.allowsCleartext = allowsCleartext
        self.atsEnforced = atsEnforced
        self.minimumTLSVersion = minimumTLSVersion
        self.offeredVersions = offeredVersions
        self.requiresForwardSecrecy = requiresForwardSecrecy
        self.offeredCipherSuites = offeredCipherSuites
        self.certificateRules = certificateRules
        self.pins = pins
        self.decidedBy = decidedBy
    }
}
