internal import COpenSSL
import Foundation

/// How to mint a leaf. The default is an Apple-compliant leaf; the other settings make *deliberately flawed*
/// leaves for the proxy's `--block tls` mode.
public struct LeafOptions: Sendable, Hashable {
    /// Who signs the leaf.
    public enum Issuer: Sendable, Hashable {
        /// The proxy CA (trusted once the user installs it).
        case authority
        /// A throwaway CA made in memory that no device trusts.
        case untrustedAuthority
        /// No CA: the leaf signs itself.
        case selfSigned
    }

    public var keyKind: PrivateKey.Kind
    public var digest: SignatureDigest
    public var issuer: Issuer
    /// Explicit validity; nil = backdated one hour, lifetime `LeafMinter.validityDays`.
    public var notBefore: Date?
    public var notAfter: Date?
    /// SAN entries to put instead of the host (`[]` = no SAN extension at all, e.g. to test "no SAN").
    public var subjectAlternativeNames: [String]?
    /// Include EKU serverAuth (iOS 13+ requires it).
    public var includeServerAuthEKU: Bool
    /// An extendedKeyUsage to write instead (OIDs, e.g. clientAuth's `1.3.6.1.5.5.7.3.2`): mirror mode copies an
    /// upstream leaf whose EKU leaves serverAuth out. nil: serverAuth or none, by `includeServerAuthEKU`.
    public var extendedKeyUsageOIDs: [String]?
    /// A key of the leaf's own instead of the one shared by every leaf of its kind: an injected `pin-mismatch`
    /// fault serves a valid leaf whose key no app can have pinned (not even the proxy's usual leaf key).
    public var freshKey: Bool

    public init(
        keyKind: PrivateKey.Kind = .p256, digest: SignatureDigest = .sha256, issuer: Issuer = .authority,
        notBefore: Date? = nil, notAfter: Date? = nil, subjectAlternativeNames: [String]? = nil,
        includeServerAuthEKU: Bool = true, extendedKeyUsageOIDs: [String]? = nil, freshKey: Bool = false
    ) {
        self.freshKey = freshKey
        self.keyKind = keyKind
        self.digest = digest
        self.issuer = issuer
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.subjectAlternativeNames = subjectAlternativeNames
        self.includeServerAuthEKU = includeServerAuthEKU
        self.extendedKeyUsageOIDs = extendedKeyUsageOIDs
    }

    /// An Apple-compliant P-256 leaf from the proxy CA.
    public static let standard = LeafOptions()
    /// An Apple-compliant RSA-2048 leaf from the proxy CA.
    public static let rsa = LeafOptions(keyKind: .rsa2048)

    /// Flaw presets for `--block tls`.
    public static func expired(now: Date = Date()) -> LeafOptions {
        LeafOptions(notBefore: now.addingTimeInterval(-60 * 86400), notAfter: now.addingTimeInterval(-86400))
    }
    public static func notYetValid(now: Date = Date()) -> LeafOptions {
        LeafOptions(notBefore: now.addingTimeInterval(7 * 86400), notAfter: now.addingTimeInterval(60 * 86400))
    }
    public static func wrongHost(_ otherName: String = "wrong.host.invalid") -> LeafOptions {
        LeafOptions(subjectAlternativeNames: [otherName])
    }
    public static let sha1Signed = LeafOptions(digest: .sha1)
    public static let weakRSA = LeafOptions(keyKind: .rsa(bits: 1024))
    public static let untrusted = LeafOptions(issuer: .untrustedAuthority)
    public static let selfSigned = LeafOptions(issuer: .selfSigned)
    /// A valid leaf from the proxy CA with a key of its own (the `pin-mismatch` fault).
    public static let freshlyKeyed = LeafOptions(freshKey: true)

    public var isStandard: Bool {
        digest == .sha256 && issuer == .authority && notBefore == nil && notAfter == nil
            && subjectAlternativeNames == nil && includeServerAuthEKU && extendedKeyUsageOIDs == nil && !freshKey
    }
}

/// Why a leaf could not be minted.
public enum MintError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The host is neither a DNS name nor an IP literal.
    case invalidHost(String)
    case openSSL(OpenSSLError)

    public var description: String {
        switch self {
        case .invalidHost(let h): "cannot mint a certificate for \"\(h)\": not a DNS name or IP address"
        case .openSSL(let e): e.description
        }
    }
}

/// Mints leaf certificates for any host from a `CertificateAuthority`, caching them in a bounded LRU.
///
/// Thread-safe: minting happens on loop threads. One key pair per key kind is reused for every leaf (the CA
/// signature, not the key, is what makes a leaf unique), which makes minting one signature cheap.
public final class LeafMinter: Sendable {
    public let authority: CertificateAuthority
    /// Leaf lifetime: 397 days keeps under the 398-day limit for system-anchored chains (reference §3.3).
    public let validityDays: Int
    public let cacheCapacity: Int

    private struct CacheKey: Hashable {
        let host: String
        let options: LeafOptions
    }

    private struct State {
        var keys: [PrivateKey.Kind: PrivateKey] = [:]
        var cache: [CacheKey: (identity: TLSConfiguration.ServerIdentity, tick: UInt64)] = [:]
        var tick: UInt64 = 0
        var untrustedCA: CertificateAuthority?
    }

    private let state = LockedState(State())

    /// `untrustedAuthority`: the never-trusted CA that signs `.untrustedAuthority` leaves (mirror mode keeps one in
    /// the CA directory, so its leaves stay the same across runs); nil makes a throwaway one on first use.
    public init(
        authority: CertificateAuthority, cacheCapacity: Int = 1024, validityDays: Int = 397,
        untrustedAuthority: CertificateAuthority? = nil
    ) {
        self.authority = authority
        self.cacheCapacity = max(1, cacheCapacity)
        self.validityDays = validityDays
        state.withLock { $0.untrustedCA = untrustedAuthority }
    }

    /// Number of cached leaves.
    public var cachedCount: Int { state.withLock { $0.cache.count } }

    /// The leaf (and chain) for `host` (DNS name or IP literal), minted on first use and cached by (host, options).
    public func identity(for host: String, options: LeafOptions = .standard, now: Date = Date())
        throws(MintError) -> TLSConfiguration.ServerIdentity
    {
        guard let kind = HostKind(host) else { throw .invalidHost(host) }
        let normalized: String
        switch kind {
        case .dns(let n), .ip(let n): normalized = n
        }
        let key = CacheKey(host: normalized, options: options)
        if let hit = state.withLock({ s -> TLSConfiguration.ServerIdentity? in
            guard let entry = s.cache[key] else { return nil }
            s.tick += 1
            s.cache[key] = (entry.identity, s.tick)
            return entry.identity
        }) {
            return hit
        }
        let identity: TLSConfiguration.ServerIdentity
        do { identity = try mint(kind, options: options, now: now) } catch { throw .openSSL(error) }
        state.withLock { s in
            s.tick += 1
            s.cache[key] = (identity, s.tick)
            if s.cache.count > cacheCapacity, let oldest = s.cache.min(by: { $0.value.tick < $1.value.tick })?.key {
                s.cache.removeValue(forKey: oldest)
            }
        }
        return identity
    }

    /// The throwaway CA that signs `.untrustedAuthority` leaves (made on first use).
    public func untrustedAuthority() throws(OpenSSLError) -> CertificateAuthority {
        if let ca = state.withLock({ $0.untrustedCA }) { return ca }
        let ca = try CertificateAuthority.create(commonName: "ATSProxy Untrusted Test CA")
        return state.withLock { s in
            if let existing = s.untrustedCA { return existing }
            s.untrustedCA = ca
            return ca
        }
    }

    private func leafKey(_ kind: PrivateKey.Kind) throws(OpenSSLError) -> PrivateKey {
        if let k = state.withLock({ $0.keys[kind] }) { return k }
        let k = try PrivateKey.generate(kind)
        return state.withLock { s in
            if let existing = s.keys[kind] { return existing }
            s.keys[kind] = k
            return k
        }
    }

    private func mint(_ host: HostKind, options: LeafOptions, now: Date) throws(OpenSSLError)
        -> TLSConfiguration.ServerIdentity
    {
        // A fresh key is minted once per host and options: the leaf is cached, so the same host keeps it.
        let key = options.freshKey ? try PrivateKey.generate(options.keyKind) : try leafKey(options.keyKind)
        let signer: CertificateAuthority?
        switch options.issuer {
        case .authority: signer = authority
        case .untrustedAuthority: signer = try untrustedAuthority()
        case .selfSigned: signer = nil
        }
        let notBefore = options.notBefore ?? now.addingTimeInterval(-3600)
        let notAfter = options.notAfter ?? notBefore.addingTimeInterval(Double(validityDays) * 86400)
        var extensions: [(Int32, String)] = [
            (NID_basic_constraints, "critical,CA:FALSE"),
            (NID_key_usage, key.isRSA ? "critical,digitalSignature,keyEncipherment" : "critical,digitalSignature"),
        ]
        if let oids = options.extendedKeyUsageOIDs, !oids.isEmpty {
            // Dotted OIDs only: the value goes into OpenSSL's config syntax.
            let safe = oids.filter { !$0.isEmpty && $0.allSatisfy { $0.isNumber || $0 == "." } }
            if !safe.isEmpty { extensions.append((NID_ext_key_usage, safe.joined(separator: ","))) }
        } else if options.includeServerAuthEKU {
            extensions.append((NID_ext_key_usage, "serverAuth"))
        }
        extensions.append((NID_subject_key_identifier, "hash"))
        if signer != nil { extensions.append((NID_authority_key_identifier, "keyid:always")) }
        let names = options.subjectAlternativeNames.map { $0.compactMap { HostKind($0)?.sanEntry } } ?? [host.sanEntry]
        if !names.isEmpty { extensions.append((NID_subject_alt_name, names.joined(separator: ","))) }
        let commonName: String
        switch host {
        case .dns(let n), .ip(let n): commonName = n
        }
        let builder = CertificateBuilder(
            commonName: commonName, organization: "ATSProxy", notBefore: notBefore, notAfter: notAfter,
            subjectKey: key, issuer: signer.map { ($0.certificate, $0.key) }, digest: options.digest,
            extensions: extensions)
        let leaf = try builder.build()
        return TLSConfiguration.ServerIdentity(chain: [leaf] + (signer.map { [$0.certificate] } ?? []), key: key)
    }
}
