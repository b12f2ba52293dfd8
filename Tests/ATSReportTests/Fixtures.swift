import ATSPolicy
import ATSReport
import Foundation

/// A plist dictionary from key/value pairs, in order.
func dict(_ pairs: KeyValuePairs<String, PlistValue>) -> PlistValue {
    .dictionary(PlistDictionary(pairs.map { ($0.key, $0.value) }))
}

let yes = PlistValue.bool(true)
let no = PlistValue.bool(false)

/// `{NSExceptionDomains: {…}}`.
func exceptions(_ pairs: KeyValuePairs<String, PlistValue>) -> PlistValue { dict(["NSExceptionDomains": dict(pairs)]) }

let now = Date(timeIntervalSince1970: 1_790_000_000)  // 2026-09
let day: Double = 86_400

/// A leaf with good defaults: RSA-2048, SHA-256, SAN for `host`, serverAuth, 90 days around `now`.
func leaf(_ host: String, bits: Int = 2048) -> CertificateFacts {
    CertificateFacts(
        subject: "CN=\(host)", issuer: "CN=Test CA", keyType: .rsa, keyBits: bits, signatureHash: .sha256,
        isSelfSigned: false, isCA: false, notBefore: now.addingTimeInterval(-30 * day),
        notAfter: now.addingTimeInterval(60 * day), dnsNames: [host], ipAddresses: [],
        extendedKeyUsages: [CertificateFacts.serverAuthOID], embeddedSCTCount: 2,
        spkiSHA256Base64: "LEAFLEAFLEAFLEAFLEAFLEAFLEAFLEAFLEAFLEAFLEA=", sha256Fingerprint: "00")
}

/// A completed handshake with `host`'s certificate, chained to a user-installed root (as the proxy's test CA is).
func completed(
    _ host: String, version: TLSVersion = .tls13, suite: UInt16 = 0x1301, hostnameMatches: Bool = true,
    bits: Int = 2048, at date: Date = now
) -> HandshakeFacts {
    HandshakeFacts(
        version: version, cipherSuiteCode: suite, cipherSuiteName: CipherSuite.lookup(code: suite)?.ianaName,
        keyExchangeGroup: CipherSuite.lookup(code: suite)?.isForwardSecret == false ? nil : "X25519", alpn: "h2",
        chain: [leaf(host, bits: bits)], trust: .trustedByUserRoot, hostnameMatches: hostnameMatches,
        observedAt: date)
}

/// A handshake as the proxy records one the app-like attempt failed: the permissive probe then completed with
/// `version` and `suite` (TLS 1.0-only server: alert protocol_version first).
func probed(_ host: String, version: TLSVersion, suite: UInt16) -> HandshakeFacts {
    var facts = completed(host, version: version, suite: suite)
    facts.failure = .alertReceived(70)
    facts.serverCapabilities = ServerCapabilities(
        supportedVersions: [version], preferredCipherCode: suite,
        preferredCipherName: CipherSuite.lookup(code: suite)?.ianaName,
        supportsForwardSecrecy: CipherSuite.lookup(code: suite)?.isForwardSecret ?? false)
    return facts
}

/// A server that refused even the permissive probe.
func refused(_ host: String) -> HandshakeFacts {
    HandshakeFacts(
        failure: .alertReceived(40), version: nil, cipherSuiteCode: nil, cipherSuiteName: nil, keyExchangeGroup: nil,
        alpn: nil, chain: [], trust: .untrusted(.noCertificate), hostnameMatches: false, observedAt: now)
}

func https(_ host: String, _ facts: HandshakeFacts? = nil, exchanges: Int = 1) -> Observation {
    Observation(url: "https://\(host)/", handshake: facts ?? completed(host), exchanges: exchanges)
}

func http(_ host: String, exchanges: Int = 1) -> Observation {
    Observation(url: "http://\(host)/feed", exchanges: exchanges)
}

/// The report of `observations` against `ats` on `ios`.
func report(_ observations: [Observation], _ ats: PlistValue? = nil, ios: IOSProfile = .ios17) -> PolicyReport {
    PolicyReport(
        observations: observations,
        policy: ReportPolicy(
            atsDictionary: ats ?? .dictionary(PlistDictionary()), source: "test.plist",
            options: PolicyOptions(profile: ios)))
}

// ECDHE-RSA-AES128-SHA (TLS 1.0 capable, forward secret) and AES128-GCM-SHA256 / AES128-SHA (static RSA).
let ecdheCBC: UInt16 = 0xC013
let staticRSAGCM: UInt16 = 0x009C
let staticRSACBC: UInt16 = 0x002F
