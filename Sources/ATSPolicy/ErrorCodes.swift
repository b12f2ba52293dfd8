/// An OSStatus in `kCFStreamErrorDomainSSL` (domain number 3), as `_kCFStreamErrorCodeKey` carries it.
/// Numbers and names: Security `base/SecBase.h` (reference §4.1, src S6/S12).
public struct SSLErrorCode: Sendable, Hashable, Codable, CustomStringConvertible {
    public let code: Int
    public let name: String
    public let meaning: String

    public var description: String { "\(code) \(name)" }

    /// The entry for `code`; unknown codes get the name `OSStatus(code)`.
    public init(_ code: Int) {
        if let row = SSLErrorCode.table.first(where: { $0.0 == code }) {
            self.code = code
            self.name = row.1
            self.meaning = row.2
        } else {
            self.code = code
            self.name = "OSStatus(\(code))"
            self.meaning = "unknown status"
        }
    }

    public static let protocolError = SSLErrorCode(-9800)
    public static let negotiation = SSLErrorCode(-9801)
    public static let fatalAlert = SSLErrorCode(-9802)
    public static let xCertChainInvalid = SSLErrorCode(-9807)
    public static let badCert = SSLErrorCode(-9808)
    public static let unknownRootCert = SSLErrorCode(-9812)
    public static let noRootCert = SSLErrorCode(-9813)
    public static let certExpired = SSLErrorCode(-9814)
    public static let certNotYetValid = SSLErrorCode(-9815)
    public static let closedNoNotify = SSLErrorCode(-9816)
    public static let peerHandshakeFail = SSLErrorCode(-9824)
    public static let peerProtocolVersion = SSLErrorCode(-9836)
    public static let peerInsufficientSecurity = SSLErrorCode(-9837)
    public static let hostNameMismatch = SSLErrorCode(-9843)
    public static let connectionRefused = SSLErrorCode(-9844)
    public static let transportReset = SSLErrorCode(-9852)
    public static let handshakeFail = SSLErrorCode(-9858)
    public static let atsViolation = SSLErrorCode(-9880)
    public static let atsMinimumVersionViolation = SSLErrorCode(-9881)
    public static let atsCiphersuiteViolation = SSLErrorCode(-9882)
    public static let atsMinimumKeySizeViolation = SSLErrorCode(-9883)
    public static let atsLeafCertificateHashAlgorithmViolation = SSLErrorCode(-9884)
    public static let atsCertificateHashAlgorithmViolation = SSLErrorCode(-9885)
    public static let atsCertificateTrustViolation = SSLErrorCode(-9886)

    static let table: [(Int, String, String)] = [
        (-9800, "errSSLProtocol", "SSL protocol error"),
        (-9801, "errSSLNegotiation", "cipher-suite negotiation failed"),
        (-9802, "errSSLFatalAlert", "fatal alert"),
        (-9803, "errSSLWouldBlock", "I/O would block"),
        (-9804, "errSSLSessionNotFound", "unknown session on resume"),
        (-9805, "errSSLClosedGraceful", "closed gracefully"),
        (-9806, "errSSLClosedAbort", "closed by error"),
        (-9807, "errSSLXCertChainInvalid", "invalid certificate chain"),
        (-9808, "errSSLBadCert", "bad certificate format"),
        (-9809, "errSSLCrypto", "underlying crypto error"),
        (-9810, "errSSLInternal", "internal error"),
        (-9811, "errSSLModuleAttach", "module attach failure"),
        (-9812, "errSSLUnknownRootCert", "valid chain, untrusted root"),
        (-9813, "errSSLNoRootCert", "chain not verified by a root"),
        (-9814, "errSSLCertExpired", "chain contains an expired certificate"),
        (-9815, "errSSLCertNotYetValid", "chain contains a certificate not yet valid"),
        (-9816, "errSSLClosedNoNotify", "server closed without close_notify"),
        (-9817, "errSSLBufferOverflow", "buffer too small"),
        (-9818, "errSSLBadCipherSuite", "bad cipher suite"),
        (-9819, "errSSLPeerUnexpectedMsg", "peer: unexpected_message"),
        (-9820, "errSSLPeerBadRecordMac", "peer: bad_record_mac"),
        (-9821, "errSSLPeerDecryptionFail", "peer: decryption_failed"),
        (-9822, "errSSLPeerRecordOverflow", "peer: record_overflow"),
        (-9823, "errSSLPeerDecompressFail", "peer: decompression_failure"),
        (-9824, "errSSLPeerHandshakeFail", "peer: handshake_failure"),
        (-9825, "errSSLPeerBadCert", "peer: bad_certificate"),
        (-9826, "errSSLPeerUnsupportedCert", "peer: unsupported_certificate"),
        (-9827, "errSSLPeerCertRevoked", "peer: certificate_revoked"),
        (-9828, "errSSLPeerCertExpired", "peer: certificate_expired"),
        (-9829, "errSSLPeerCertUnknown", "peer: certificate_unknown"),
        (-9830, "errSSLIllegalParam", "illegal_parameter"),
        (-9831, "errSSLPeerUnknownCA", "peer: unknown_ca"),
        (-9832, "errSSLPeerAccessDenied", "peer: access_denied"),
        (-9833, "errSSLPeerDecodeError", "peer: decode_error"),
        (-9834, "errSSLPeerDecryptError", "peer: decrypt_error"),
        (-9835, "errSSLPeerExportRestriction", "peer: export_restriction"),
        (-9836, "errSSLPeerProtocolVersion", "peer: protocol_version"),
        (-9837, "errSSLPeerInsufficientSecurity", "peer: insufficient_security"),
        (-9838, "errSSLPeerInternalError", "peer: internal_error"),
        (-9839, "errSSLPeerUserCancelled", "peer: user_canceled"),
        (-9840, "errSSLPeerNoRenegotiation", "peer: no_renegotiation"),
        (-9841, "errSSLPeerAuthCompleted", "peer certificate valid or ignored"),
        (-9842, "errSSLClientCertRequested", "server asked for a client certificate"),
        (-9843, "errSSLHostNameMismatch", "host name mismatch"),
        (-9844, "errSSLConnectionRefused", "peer dropped connection before responding"),
        (-9845, "errSSLDecryptionFail", "decryption failure"),
        (-9846, "errSSLBadRecordMac", "bad MAC"),
        (-9847, "errSSLRecordOverflow", "record overflow"),
        (-9848, "errSSLBadConfiguration", "configuration error"),
        (-9849, "errSSLUnexpectedRecord", "unexpected record"),
        (-9850, "errSSLWeakPeerEphemeralDHKey", "weak ephemeral DH key"),
        (-9851, "errSSLClientHelloReceived", "SNI break"),
        (-9852, "errSSLTransportReset", "transport reset"),
        (-9853, "errSSLNetworkTimeout", "network timeout"),
        (-9854, "errSSLConfigurationFailed", "TLS configuration failed"),
        (-9855, "errSSLUnsupportedExtension", "unsupported extension"),
        (-9856, "errSSLUnexpectedMessage", "peer rejected unexpected message"),
        (-9857, "errSSLDecompressFail", "decompression failed"),
        (-9858, "errSSLHandshakeFail", "handshake failed"),
        (-9859, "errSSLDecodeError", "decode failed"),
        (-9860, "errSSLInappropriateFallback", "inappropriate fallback"),
        (-9861, "errSSLMissingExtension", "missing extension"),
        (-9862, "errSSLBadCertificateStatusResponse", "bad OCSP response"),
        (-9863, "errSSLCertificateRequired", "certificate required"),
        (-9864, "errSSLUnknownPSKIdentity", "unknown PSK identity"),
        (-9865, "errSSLUnrecognizedName", "unrecognized name"),
        (-9880, "errSSLATSViolation", "ATS violation"),
        (-9881, "errSSLATSMinimumVersionViolation", "negotiated protocol version below the ATS minimum"),
        (-9882, "errSSLATSCiphersuiteViolation", "selected cipher suite not ATS compliant"),
        (-9883, "errSSLATSMinimumKeySizeViolation", "peer key size not ATS compliant"),
        (-9884, "errSSLATSLeafCertificateHashAlgorithmViolation", "leaf signature hash not ATS compliant"),
        (-9885, "errSSLATSCertificateHashAlgorithmViolation", "a chain certificate's hash not ATS compliant"),
        (-9886, "errSSLATSCertificateTrustViolation", "peer certificate not issued by a trusted peer"),
        (-9890, "errSSLEarlyDataRejected", "0-RTT data rejected"),
    ]
}

/// An error code in `NSURLErrorDomain` (reference §4.2, F1).
public struct URLErrorCode: Sendable, Hashable, Codable, CustomStringConvertible {
    public let code: Int
    public let name: String
    /// The localized description Foundation gives this code (en).
    public let localizedDescription: String

    public var description: String { "\(code) \(name)" }

    public init(_ code: Int) {
        if let row = URLErrorCode.table.first(where: { $0.0 == code }) {
            self.code = code
            self.name = row.1
            self.localizedDescription = row.2
        } else {
            self.code = code
            self.name = "NSURLError(\(code))"
            self.localizedDescription = "An unknown error occurred."
        }
    }

    public static let requiresSecureConnection = URLErrorCode(-1022)
    public static let secureConnectionFailed = URLErrorCode(-1200)
    public static let serverCertificateHasBadDate = URLErrorCode(-1201)
    public static let serverCertificateUntrusted = URLErrorCode(-1202)
    public static let serverCertificateHasUnknownRoot = URLErrorCode(-1203)
    public static let serverCertificateNotYetValid = URLErrorCode(-1204)
    public static let clientCertificateRejected = URLErrorCode(-1205)
    public static let clientCertificateRequired = URLErrorCode(-1206)
    public static let timedOut = URLErrorCode(-1001)
    public static let cannotFindHost = URLErrorCode(-1003)
    public static let cannotConnectToHost = URLErrorCode(-1004)

    static let table: [(Int, String, String)] = [
        (-1022, "NSURLErrorAppTransportSecurityRequiresSecureConnection",
         "The resource could not be loaded because the App Transport Security policy requires the use of a secure connection."),
        (-1200, "NSURLErrorSecureConnectionFailed",
         "An SSL error has occurred and a secure connection to the server cannot be made."),
        (-1201, "NSURLErrorServerCertificateHasBadDate",
         "The certificate for this server has expired."),
        (-1202, "NSURLErrorServerCertificateUntrusted",
         "The certificate for this server is invalid."),
        (-1203, "NSURLErrorServerCertificateHasUnknownRoot",
         "The certificate for this server was signed by an unknown certifying authority."),
        (-1204, "NSURLErrorServerCertificateNotYetValid",
         "The certificate for this server is not yet valid."),
        (-1205, "NSURLErrorClientCertificateRejected",
         "The server did not accept the certificate."),
        (-1206, "NSURLErrorClientCertificateRequired",
         "The server requires a client certificate."),
        (-1001, "NSURLErrorTimedOut", "The request timed out."),
        (-1003, "NSURLErrorCannotFindHost", "A server with the specified hostname could not be found."),
        (-1004, "NSURLErrorCannotConnectToHost", "Could not connect to the server."),
        (-1005, "NSURLErrorNetworkConnectionLost", "The network connection was lost."),
        (-1009, "NSURLErrorNotConnectedToInternet", "The Internet connection appears to be offline."),
    ]
}
