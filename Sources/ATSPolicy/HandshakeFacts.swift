import FoundationEssentials

/// What a TLS stack learned about one certificate of the served chain. Filled by TLSCore, judged by ATSPolicy.
public struct CertificateFacts: Sendable, Hashable, Codable {
    public enum KeyType: String, Sendable, Codable { case rsa, ec, ed25519, ed448, dsa, other }
    public enum SignatureHash: String, Sendable, Codable, Comparable {
        case md2, md4, md5, sha1, sha224, sha256, sha384, sha512, intrinsic, unknown
        /// True for hashes ATS and iOS 13+ trust accept (SHA-2 family, or Ed25519's intrinsic hash).
        public var isSHA2OrBetter: Bool { [.sha224, .sha256, .sha384, .sha512, .intrinsic].contains(self) }
        private var rank: Int { [.unknown, .md2, .md4, .md5, .sha1, .sha224, .sha256, .sha384, .sha512, .intrinsic].firstIndex(of: self)! }
        public static func < (a: SignatureHash, b: SignatureHash) -> Bool { a.rank < b.rank }
    }

    public var subject: String
    public var issuer: String
    public var keyType: KeyType
    /// RSA modulus bits, or the curve's field size for EC (256 for P-256).
    public var keyBits: Int
    /// EC curve name (`prime256v1`, `secp384r1`) when `keyType == .ec`.
    public var curve: String?
    public var signatureHash: SignatureHash
    public var isSelfSigned: Bool
    public var isCA: Bool
    public var notBefore: Date
    public var notAfter: Date
    public var dnsNames: [String]
    public var ipAddresses: [String]
    /// Extended key usage OIDs; nil when the certificate has no EKU extension at all.
    public var extendedKeyUsages: [String]?
    /// Embedded SCTs (precertificate SCT list extension).
    public var embeddedSCTCount: Int
    /// Base64(SHA-256(DER SubjectPublicKeyInfo)): the `SPKI-SHA256-BASE64` of `NSPinnedDomains`.
    public var spkiSHA256Base64: String
    /// Hex SHA-256 of the DER certificate.
    public var sha256Fingerprint: String

    public init(
        subject: String, issuer: String, keyType: KeyType, keyBits: Int, curve: String? = nil,
        signatureHash: SignatureHash, isSelfSigned: Bool, isCA: Bool, notBefore: Date, notAfter: Date,
        dnsNames: [String], ipAddresses: [String], extendedKeyUsages: [String]?, embeddedSCTCount: Int,
        spkiSHA256Base64: String, sha256Fingerprint: String
    ) {
        self.subject = subject
        self.issuer = issuer
        self.keyType = keyType
        self.keyBits = keyBits
        self.curve = curve
        self.signatureHash = signatureHash
        self.isSelfSigned = isSelfSigned
        self.isCA = isCA
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.dnsNames = dnsNames
        self.ipAddresses = ipAddresses
        self.extendedKeyUsages = extendedKeyUsages
        self.embeddedSCTCount = embeddedSCTCount
        self.spkiSHA256Base64 = spkiSHA256Base64
        self.sha256Fingerprint = sha256Fingerprint
    }

    /// OID of id-kp-serverAuth.
    public static let serverAuthOID = "1.3.6.1.5.5.7.3.1"
    /// OID of anyExtendedKeyUsage.
    public static let anyEKUOID = "2.5.29.37.0"
}

/// The outcome of chain verification against the trust store the simulated device has
/// (system roots plus the user-installed roots given with `--trust-ca`).
public enum TrustResult: Sendable, Hashable {
    /// Chains to a root in the system store.
    case trustedBySystemRoot
    /// Chains to a root the user installed (the proxy CA, or `--trust-ca`): CT and some strict EKU/validity checks
    /// do not apply (reference §3.3, §3.5).
    case trustedByUserRoot
    case untrusted(TrustFailure)
}

extension TrustResult: CustomStringConvertible {
    /// How traces and reports show it: `chains to a user-installed root`, `untrusted (selfSigned)`.
    public var description: String {
        switch self {
        case .trustedBySystemRoot: "chains to a system root"
        case .trustedByUserRoot: "chains to a user-installed root"
        case .untrusted(let reason): "untrusted (\(reason.rawValue))"
        }
    }
}

/// Why chain verification failed, in the terms iOS trust evaluation uses. `noCertificate`: there was no chain to
/// verify (the handshake failed before the server's certificate arrived).
public enum TrustFailure: String, Sendable, Hashable, Codable {
    case selfSigned, unknownRoot, expired, notYetValid, badSignature, invalidChain, revoked, noCertificate, other
}

/// How a handshake ended when it did not complete.
public enum HandshakeFailure: Sendable, Hashable {
    /// The server sent a fatal alert (TLS alert description number, e.g. 70 protocol_version, 40 handshake_failure).
    case alertReceived(UInt8)
    /// The client side gave up, e.g. the server chose a version or suite the client never offered.
    case localError(String)
    /// The connection closed or reset before the handshake finished.
    case closedDuringHandshake
    /// The peer did not answer with TLS at all.
    case notTLS
    /// The TCP connect and TLS handshake together did not finish within the client's timeout.
    case timedOut
}

extension HandshakeFailure: CustomStringConvertible {
    /// How reports and traces say it: `the server sent the alert protocol_version (70)`.
    public var description: String {
        switch self {
        case .alertReceived(let code): "the server sent the alert \(TLSAlert(code))"
        case .localError(let text): text
        case .closedDuringHandshake: "the connection closed before the handshake finished"
        case .notTLS: "the server did not answer with TLS"
        case .timedOut: "the server did not complete the handshake within the timeout"
        }
    }
}

/// What the server turned out to support, from a second, permissive probe (every version and suite this
/// OpenSSL can still negotiate). Lets a verdict say *why* the iOS-like handshake failed.
public struct ServerCapabilities: Sendable, Hashable {
    /// Versions the server accepted when offered one at a time.
    public var supportedVersions: [TLSVersion]
    /// The suite the server chose when offered everything, with its wire code.
    public var preferredCipherCode: UInt16?
    public var preferredCipherName: String?
    /// Whether the server accepted any forward-secret suite.
    public var supportsForwardSecrecy: Bool

    public init(
        supportedVersions: [TLSVersion], preferredCipherCode: UInt16?, preferredCipherName: String?,
        supportsForwardSecrecy: Bool
    ) {
        self.supportedVersions = supportedVersions
        self.preferredCipherCode = preferredCipherCode
        self.preferredCipherName = preferredCipherName
        self.supportsForwardSecrecy = supportsForwardSecrecy
    }
}

/// Everything observed on one upstream TLS connection: the input of the post-handshake evaluation.
public struct HandshakeFacts: Sendable, Hashable {
    /// nil when the handshake completed.
    public var failure: HandshakeFailure?
    public var version: TLSVersion?
    public var cipherSuiteCode: UInt16?
    /// The stack's name for the negotiated suite (IANA name where known).
    public var cipherSuiteName: String?
    /// Key-exchange group (`X25519`, `secp256r1`, …); nil for static RSA.
    public var keyExchangeGroup: String?
    public var alpn: String?
    /// Leaf first, as served.
    public var chain: [CertificateFacts]
    public var trust: TrustResult
    /// The leaf's SAN matches the host the app asked for (DNS names, or IP addresses for IP hosts; CN ignored).
    public var hostnameMatches: Bool
    /// When the facts were taken; validity is judged at this time.
    public var observedAt: Date
    /// Filled when a permissive second probe ran.
    public var serverCapabilities: ServerCapabilities?

    public init(
        failure: HandshakeFailure? = nil, version: TLSVersion?, cipherSuiteCode: UInt16?, cipherSuiteName: String?,
        keyExchangeGroup: String?, alpn: String?, chain: [CertificateFacts], trust: TrustResult,
        hostnameMatches: Bool, observedAt: Date, serverCapabilities: ServerCapabilities? = nil
    ) {
        self.failure = failure
        self.version = version
        self.cipherSuiteCode = cipherSuiteCode
        self.cipherSuiteName = cipherSuiteName
        self.keyExchangeGroup = keyExchangeGroup
        self.alpn = alpn
        self.chain = chain
        self.trust = trust
        self.hostnameMatches = hostnameMatches
        self.observedAt = observedAt
        self.serverCapabilities = serverCapabilities
    }
}
