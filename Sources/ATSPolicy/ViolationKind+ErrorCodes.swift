/// The error pair a client sees for one kind of violation on one OS profile, with how sure we are.
public struct ErrorMapping: Sendable, Hashable, Codable {
    /// The top-level NSURLErrorDomain code.
    public let urlError: URLErrorCode
    /// nil for -1022, which carries no SSL keys (reference §4.3).
    public let sslError: SSLErrorCode?
    /// nil when documented or observed; otherwise which reading was taken and the reference row it rests on.
    public let note: String?

    init(_ url: Int, _ ssl: Int?, _ note: String? = nil) {
        self.urlError = URLErrorCode(url)
        self.sslError = ssl.map(SSLErrorCode.init)
        self.note = note
    }
}

extension ViolationKind {
    /// The NSURLError / kCFStreamErrorDomainSSL codes for this violation on `profile` (reference §4.4).
    public func errorCodes(on profile: IOSProfile) -> ErrorMapping {
        switch self {
        case .cleartextNotAllowed:
            // §4.4 row 1 (doc A2, F1): refused before connecting, no SSL keys.
            return ErrorMapping(-1022, nil)
        case .tlsVersionTooLow:
            // §4.4 row 2: -9824 on iOS 9 (obs I3), -9801 on iOS 10 (obs I4), -9836 on the modern stack (X2,
            // observed on macOS 26; taken for iOS 14+ as inferred).
            switch profile {
            case .ios9: return ErrorMapping(-1200, -9824)
            case .ios10: return ErrorMapping(-1200, -9801)
            case .ios14, .ios17:
                return ErrorMapping(
                    -1200, -9836,
                    "SSL code -9836 for iOS 14–17 is inferred from what iOS and macOS 26 report (OWASP MASTG)")
            case .ios26: return ErrorMapping(-1200, -9836)
            }
        case .tlsVersionRefusedByOS:
            // §4.4 last row: still fails on iOS/macOS 26 with -1200 / -9836 (X2, secondary source).
            return ErrorMapping(
                -1200, -9836,
                "iOS 26 refusing TLS 1.0/1.1 even with an exception rests on a secondary source (OWASP MASTG), "
                    + "not on Apple's documentation")
        case .cipherSuiteNotAllowed, .noSharedCipherOrVersion:
            // §4.4 row 3: the client never offered the server's suites, the server answers handshake_failure.
            switch profile {
            case .ios9: return ErrorMapping(-1200, -9824, "SSL code inferred")
            case .ios10: return ErrorMapping(-1200, -9801, "SSL code inferred")
            default:
                return ErrorMapping(
                    -1200, -9824,
                    "SSL code inferred: the server's handshake_failure alert, errSSLPeerHandshakeFail")
            }
        case .weakKey, .weakSignatureHash:
            // §4.4 rows 4–5: iOS 9/10 ATS certificate checks fail as -1200/-9802 (obs I2, P2); from iOS 13 default
            // trust rejects these certificates for every TLS connection, most likely as -1202.
            if profile <= .ios10 { return ErrorMapping(-1200, -9802) }
            return ErrorMapping(
                -1202, -9802,
                "-1202 / -9802 for a weak certificate on iOS 13+ is inferred")
        case .selfSigned, .untrustedRoot:
            // §4.4 row 6: -1202 with -9813 errSSLNoRootCert, observed from iOS 9 to iOS 18 (I1).
            return ErrorMapping(-1202, -9813)
        case .hostnameMismatch:
            // §4.4 row 7: -1202 (doc A3); -9843 errSSLHostNameMismatch is inferred.
            return ErrorMapping(-1202, -9843, "SSL code -9843 inferred")
        case .expired:
            return ErrorMapping(
                -1202, -9814, "SSL code -9814 inferred; -1202 is what iOS reports for certificate failures")
        case .notYetValid:
            return ErrorMapping(-1202, -9815, "SSL code -9815 inferred by analogy with expiry")
        case .invalidChain:
            return ErrorMapping(-1202, -9807, "SSL code -9807 errSSLXCertChainInvalid inferred")
        case .missingServerAuthEKU, .validityTooLong, .certificateTransparencyMissing:
            // §4.4 row 9: trust failure -> -1202; the SSL code is not documented.
            return ErrorMapping(-1202, -9802, "-1202 inferred, SSL code -9802 chosen")
        case .pinMismatch:
            // §4.4 row 10: the trust check fails with -9886 (src S9); the URL code is unconfirmed.
            return ErrorMapping(
                -1202, -9886,
                "pin mismatches fail trust with -9886 in Apple's open-source Security code; URL code -1202 chosen, "
                    + "unconfirmed")
        case .notTLS:
            // The handshake got no certificate, so no -1202 trust code fits. -1200 is the generic TLS failure
            // (§4.2); of §4.1's codes errSSLProtocol (-9800) is the one for a peer whose bytes are not TLS at
            // all, where -9806 errSSLClosedAbort (`.connectionFailed`) is for a peer that just closes.
            return ErrorMapping(-1200, -9800, "codes chosen: errSSLProtocol for a non-TLS answer (unconfirmed)")
        case .connectionFailed:
            return ErrorMapping(-1200, -9806, "codes chosen: errSSLClosedAbort for a handshake cut short (unconfirmed)")
        case .timedOut:
            // NSURLErrorTimedOut is in NSURLError.h (F1), not in §4.2's TLS table: a timeout is no TLS verdict,
            // so no SSL code is claimed (CFNetwork may add stream-error keys of its own).
            return ErrorMapping(
                -1001, nil, "-1001 NSURLErrorTimedOut for a handshake that never finishes is inferred")
        case .unreachable:
            // No TLS happened; the code depends on what failed (-1003 no such host, -1001 timed out): this is the
            // refused connection's, and whoever saw the failure sets the precise one.
            return ErrorMapping(-1004, nil)
        }
    }
}
