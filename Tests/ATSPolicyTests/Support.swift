import ATSPolicy
import FoundationEssentials

/// A plist dictionary from key/value pairs, in order.
func dict(_ pairs: KeyValuePairs<String, PlistValue>) -> PlistValue {
    .dictionary(PlistDictionary(pairs.map { ($0.key, $0.value) }))
}

let yes = PlistValue.bool(true)
let no = PlistValue.bool(false)
func str(_ s: String) -> PlistValue { .string(s) }

/// `NSExceptionDomains` with the given entries.
func domains(_ pairs: KeyValuePairs<String, PlistValue>) -> PlistValue { dict(pairs) }

/// A policy from an ATS dictionary on a profile.
func policy(_ ats: PlistValue?, _ profile: IOSProfile = .newest, options: PolicyOptions? = nil) -> ATSPolicy {
    var o = options ?? PolicyOptions()
    o.profile = profile
    return ATSPolicy(atsDictionary: ats, options: o)
}

func https(_ host: String) -> ConnectionTarget { ConnectionTarget(scheme: "https", host: host) }
func http(_ host: String) -> ConnectionTarget { ConnectionTarget(scheme: "http", host: host) }

/// The requirements for an allowed target; nil when blocked.
func req(_ p: ATSPolicy, _ target: ConnectionTarget) -> ConnectionRequirements? {
    p.requirements(for: target).requirements
}

/// True when an http:// load to `host` is refused with -1022.
func cleartextBlocked(_ p: ATSPolicy, _ host: String) -> Bool {
    p.requirements(for: http(host)).violation?.urlError.code == -1022
}

let now = Date(timeIntervalSince1970: 1_790_000_000)  // 2026-09
let day: Double = 86_400

/// A certificate with good defaults: RSA-2048, SHA-256, SAN for `host`, serverAuth, 90 days around `now`.
func cert(
    host: String = "api.example.com", keyType: CertificateFacts.KeyType = .rsa, bits: Int = 2048,
    hash: CertificateFacts.SignatureHash = .sha256, selfSigned: Bool = false, isCA: Bool = false,
    notBefore: Date = now.addingTimeInterval(-30 * day), lifetimeDays: Double = 90,
    dnsNames: [String]? = nil, ips: [String] = [], ekus: [String]? = [CertificateFacts.serverAuthOID],
    scts: Int = 2, spki: String = "LEAFLEAFLEAFLEAFLEAFLEAFLEAFLEAFLEAFLEAFLEA="
) -> CertificateFacts {
    CertificateFacts(
        subject: "CN=\(host)", issuer: "CN=Test CA", keyType: keyType, keyBits: bits, signatureHash: hash,
        isSelfSigned: selfSigned, isCA: isCA, notBefore: notBefore,
        notAfter: notBefore.addingTimeInterval(lifetimeDays * day), dnsNames: dnsNames ?? [host], ipAddresses: ips,
        extendedKeyUsages: ekus, embeddedSCTCount: scts, spkiSHA256Base64: spki, sha256Fingerprint: "00")
}

func caCert(
    spki: String = "CACACACACACACACACACACACACACACACACACACACACAC=", hash: CertificateFacts.SignatureHash = .sha256,
    bits: Int = 2048
) -> CertificateFacts {
    cert(host: "Test CA", bits: bits, hash: hash, isCA: true, lifetimeDays: 3650, dnsNames: [], ekus: nil, spki: spki)
}

/// A completed handshake with modern parameters and a good chain.
func handshake(
    version: TLSVersion = .tls13, suite: UInt16 = 0x1301, chain: [CertificateFacts]? = nil,
    trust: TrustResult = .trustedBySystemRoot, hostnameMatches: Bool = true
) -> HandshakeFacts {
    HandshakeFacts(
        version: version, cipherSuiteCode: suite, cipherSuiteName: CipherSuite.lookup(code: suite)?.ianaName,
        keyExchangeGroup: "X25519", alpn: "h2", chain: chain ?? [cert(), caCert()], trust: trust,
        hostnameMatches: hostnameMatches, observedAt: now)
}

/// A failed handshake explained by a permissive probe.
func failedHandshake(
    _ failure: HandshakeFailure, versions: [TLSVersion], preferred: UInt16?, forwardSecret: Bool
) -> HandshakeFacts {
    HandshakeFacts(
        failure: failure, version: nil, cipherSuiteCode: nil, cipherSuiteName: nil, keyExchangeGroup: nil, alpn: nil,
        chain: [], trust: .trustedBySystemRoot, hostnameMatches: true, observedAt: now,
        serverCapabilities: ServerCapabilities(
            supportedVersions: versions, preferredCipherCode: preferred,
            preferredCipherName: preferred.flatMap { CipherSuite.lookup(code: $0)?.ianaName },
            supportsForwardSecrecy: forwardSecret))
}

extension ExceptionFix {
    /// The keys of a `.setKeys` fix as `[name: value]`, for assertions.
    var keyMap: [String: PlistValue] {
        guard case .setKeys(_, let keys) = self else { return [:] }
        return Dictionary(keys.map { ($0.key, $0.value) }, uniquingKeysWith: { _, b in b })
    }
    var domain: String? {
        if case .setKeys(let d, _) = self { d } else { nil }
    }
    var isNoExceptionCanHelp: Bool {
        if case .noExceptionCanHelp = self { true } else { false }
    }
}
