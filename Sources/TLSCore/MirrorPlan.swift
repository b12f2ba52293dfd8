import ATSPolicy
import Foundation

// Theory of operation: `--ats mirror` shows the device an upstream exactly as weak as the real one, so the device's
// own ATS decides. A MirrorPlan is a pure function of what the upstream handshake learned (HandshakeFacts: the
// version and suite the server chose when offered up to TLS 1.3, the leaf's facts, the chain's trust and whether
// the leaf names the host) and gives back:
//
// - the client leg's protocol (nil = the proxy's own modern TLS, as today): the server's highest version and no
//   higher, TLS 1.0 upwards when that is below TLS 1.2; exactly the suite the server chose (so static RSA key
//   exchange stays static RSA, CBC stays CBC); OpenSSL security level 0, without which OpenSSL 3 refuses TLS 1.0/1.1;
// - the leaf template (LeafOptions; `.standard` = today's leaf): the upstream leaf's key type and size, SHA-1
//   signature, its validity dates when they are a flaw, its SANs when they do not name the host, its EKU when it
//   lacks serverAuth, and the never-trusted CA as issuer when the upstream chain is not trusted;
// - what is mirrored (`weaknesses`, for the console) and what cannot be (`notReproduced`).
//
// A healthy upstream (TLS 1.2+ with a forward-secret AEAD suite and a flawless leaf) gives `.healthy`: served
// exactly as today. The protocol is mirrored only when it is weak, since a device decides nothing by TLS 1.2 vs 1.3.

/// How mirror mode serves the client for one upstream (see the theory of operation above).
public struct MirrorPlan: Sendable, Hashable {
    /// The client leg's protocol settings when the upstream's protocol is weak.
    public struct ProtocolMirror: Sendable, Hashable {
        public var minimumVersion: TLSVersion
        public var maximumVersion: TLSVersion
        /// OpenSSL's name of the one TLS ≤ 1.2 suite served (the upstream's choice).
        public var cipherSuite: String

        /// A protocol set by hand (an injected fault's): `cipherSuite` may be an OpenSSL cipher list.
        public init(minimumVersion: TLSVersion, maximumVersion: TLSVersion, cipherSuite: String) {
            self.minimumVersion = minimumVersion
            self.maximumVersion = maximumVersion
            self.cipherSuite = cipherSuite
        }
    }

    /// nil: the proxy's own protocol settings (today's defaults).
    public var protocolMirror: ProtocolMirror?
    /// The leaf minted for the client; `.standard` when the upstream leaf has no flaw to copy.
    public var leaf: LeafOptions
    /// What the device is shown that a healthy server would not, in the console's words (`TLSv1.0`,
    /// `static RSA key exchange`, `CBC`, `leaf RSA-1024`, `leaf expired`…).
    public var weaknesses: [String]
    /// What the proxy cannot make the device meet (CT under a user-installed root, revocation, Apple's 398-day rule
    /// for system roots), each with why.
    public var notReproduced: [String]
    /// The version the upstream negotiated (what the console names after `MIRROR`); nil when unknown.
    public var upstreamVersion: TLSVersion?

    /// The plan for an upstream whose handshake gave `facts` (the version and suite it chose when offered up to TLS
    /// 1.3); `suiteOpenSSLName` is OpenSSL's name of that suite.
    public init(facts: HandshakeFacts, suiteOpenSSLName: String?) {
        weaknesses = []
        notReproduced = []
        upstreamVersion = facts.version
        protocolMirror = nil
        leaf = .standard

        // Protocol: weak when below TLS 1.2, not forward secret, or not AEAD.
        if let version = facts.version, let suite = suiteOpenSSLName, version != .tls13 {
            let forwardSecret = MirrorPlan.isForwardSecret(suite)
            let aead = MirrorPlan.isAEAD(suite)
            if version < .tls12 || !forwardSecret || !aead {
                if version < .tls12 { weaknesses.append(version.plistName) }
                if !forwardSecret { weaknesses.append("static RSA key exchange") }
                if !aead { weaknesses.append("CBC") }
                protocolMirror = ProtocolMirror(
                    minimumVersion: version < .tls12 ? .tls10 : .tls12, maximumVersion: version, cipherSuite: suite)
            }
        }

        guard let cert = facts.chain.first else { return }
        var options = LeafOptions.standard
        var leafFlaws: [String] = []

        // Key: a weak key is copied; otherwise the key type is, once anything is mirrored (a mirrored suite names
        // it: ECDHE-RSA and static RSA need an RSA key, ECDHE-ECDSA an EC one; a flawed leaf should differ from the
        // upstream's in nothing else).
        switch cert.keyType {
        case .rsa where cert.keyBits < 2048:
            options.keyKind = .rsa(bits: max(512, cert.keyBits))
            leafFlaws.append("RSA-\(cert.keyBits)")
        case .rsa:
            options.keyKind = .rsa2048
        case .ec where cert.keyBits < 256:
            if let curve = cert.curve {
                options.keyKind = .ec(curve: curve)
                leafFlaws.append("EC-\(cert.keyBits)")
            } else {
                notReproduced.append("the leaf's EC-\(cert.keyBits) key (its curve is unnamed)")
            }
        default:
            break
        }

        switch cert.signatureHash {
        case .sha1:
            options.digest = .sha1
            leafFlaws.append("SHA-1")
        case .md2, .md4, .md5:
            // OpenSSL 3 signs with nothing weaker than SHA-1: the device meets the nearest weak hash.
            options.digest = .sha1
            leafFlaws.append("SHA-1 (for \(cert.signatureHash.rawValue.uppercased()))")
        default:
            break
        }

        let now = facts.observedAt
        let lifetimeDays = Int((cert.notAfter.timeIntervalSince(cert.notBefore) / 86_400).rounded(.down))
        let datesFlawed = cert.notAfter < now || cert.notBefore > now || lifetimeDays > 398
        if datesFlawed {
            options.notBefore = cert.notBefore
            options.notAfter = cert.notAfter
            if cert.notAfter < now { leafFlaws.append("expired") }
            if cert.notBefore > now { leafFlaws.append("not yet valid") }
            if lifetimeDays > 398 { leafFlaws.append("valid \(lifetimeDays) days") }
            if lifetimeDays > 398, lifetimeDays <= 825, facts.trust == .trustedBySystemRoot {
                notReproduced.append(
                    "the 398-day limit (it binds system-trusted chains only; the mirrored leaf chains to the "
                        + "user-installed proxy CA, where 825 days apply)")
            }
        }

        if !facts.hostnameMatches {
            options.subjectAlternativeNames = cert.dnsNames + cert.ipAddresses
            let names = cert.dnsNames + cert.ipAddresses
            leafFlaws.append(names.isEmpty ? "no SAN" : "names \(names.joined(separator: ","))")
        }

        if let ekus = cert.extendedKeyUsages {
            if !ekus.contains(CertificateFacts.serverAuthOID), !ekus.contains(CertificateFacts.anyEKUOID) {
                options.extendedKeyUsageOIDs = ekus.isEmpty ? nil : ekus
                if ekus.isEmpty { options.includeServerAuthEKU = false }
                leafFlaws.append("EKU without serverAuth")
            }
        } else {
            options.includeServerAuthEKU = false
            leafFlaws.append("no EKU")
            if facts.trust == .trustedBySystemRoot {
                notReproduced.append(
                    "the serverAuth EKU rule for system-trusted chains (iOS may skip it under the user-installed "
                        + "proxy CA, reference §3.3)")
            }
        }

        switch facts.trust {
        case .untrusted(let failure):
            switch failure {
            case .selfSigned, .unknownRoot, .invalidChain, .badSignature, .other, .noCertificate:
                options.issuer = .untrustedAuthority
                leafFlaws.append(failure == .selfSigned ? "self-signed chain" : "untrusted chain")
            case .revoked:
                notReproduced.append("revocation (a revoked certificate cannot be re-issued as revoked)")
            case .expired, .notYetValid:
                // A date on an intermediate: the leaf carries the date flaw when it has one; else the chain is
                // served as untrusted, which fails the device the same way (-1202).
                if !datesFlawed {
                    options.issuer = .untrustedAuthority
                    leafFlaws.append("chain out of date")
                }
            }
        case .trustedBySystemRoot:
            if cert.embeddedSCTCount == 0 {
                notReproduced.append(
                    "Certificate Transparency (a user-installed root such as the proxy CA is exempt, reference §3.5)")
            }
        case .trustedByUserRoot:
            break
        }

        if !leafFlaws.isEmpty || protocolMirror != nil {
            leaf = options
            weaknesses += leafFlaws.map { "leaf \($0)" }
        }
    }

    /// A plan made on purpose rather than copied from an upstream: an injected fault (issue 33's `--fault`) shows the
    /// device a flawed server through the same client-leg machinery mirror mode uses.
    public init(injecting protocolMirror: ProtocolMirror?, leaf: LeafOptions, weaknesses: [String]) {
        self.protocolMirror = protocolMirror
        self.leaf = leaf
        self.weaknesses = weaknesses
        notReproduced = []
        upstreamVersion = nil
    }

    /// A plan that changes nothing: the proxy's own TLS and leaf.
    public static let healthy = MirrorPlan()

    private init() {
        protocolMirror = nil
        leaf = .standard
        weaknesses = []
        notReproduced = []
        upstreamVersion = nil
    }

    /// True when the client is served exactly as without mirror mode.
    public var isHealthy: Bool { protocolMirror == nil && leaf == .standard }

    /// Whether the client leg needs OpenSSL's security level 0: TLS 1.0/1.1 (OpenSSL 3 refuses them above it),
    /// RSA below 2048 bits, EC below 224 bits and SHA-1 signatures (a server refuses to load such a leaf otherwise).
    public var needsSecurityLevelZero: Bool {
        if protocolMirror != nil { return true }
        if leaf.digest == .sha1 { return true }
        switch leaf.keyKind {
        case .rsa(let bits): return bits < 2048
        case .ec: return true
        case .p256: return false
        }
    }

    /// The client leg's configuration: `identity` (a leaf minted from `leaf`) with the mirrored protocol.
    public func serverConfiguration(identity: TLSConfiguration.ServerIdentity, alpn: [String]) -> TLSConfiguration {
        var configuration = TLSConfiguration.server(identity: identity, alpn: alpn)
        if let p = protocolMirror {
            configuration.minimumVersion = p.minimumVersion
            configuration.maximumVersion = p.maximumVersion
            configuration.cipherList = p.cipherSuite
        }
        if needsSecurityLevelZero { configuration.securityLevel = 0 }
        return configuration
    }

    /// Forward secret: ECDHE or DHE key exchange (TLS 1.3 suites are handled before this is asked).
    static func isForwardSecret(_ openSSLName: String) -> Bool {
        ["ECDHE-", "DHE-", "EDH-"].contains { openSSLName.hasPrefix($0) }
    }

    /// AEAD: GCM, CCM or ChaCha20-Poly1305; everything else negotiable is CBC (or worse: RC4, 3DES).
    static func isAEAD(_ openSSLName: String) -> Bool {
        ["GCM", "CCM", "CHACHA20"].contains { openSSLName.contains($0) }
    }
}
