internal import COpenSSL
import ATSPolicy
import Foundation

/// The outcome of verifying a served chain, with OpenSSL's own reason kept for display.
public struct TrustEvaluation: Sendable, Hashable {
    public var result: TrustResult
    /// `X509_V_ERR_*` of the attempt that decided the result (0 when trusted).
    public var openSSLCode: Int
    /// `X509_verify_cert_error_string` of that code.
    public var openSSLReason: String
    /// The latest notBefore and the earliest notAfter of every certificate the verification looked at (the served
    /// chain and the path it built, anchor included): at any time between the two, every date check it made comes
    /// out the same, so the result still holds (`PeerCertificateFacts.trustHolds(at:)`). An empty window
    /// (`validFrom > validUntil`) means some certificate was out of date.
    public var validFrom: Date = .distantFuture
    public var validUntil: Date = .distantPast
}

/// Verifies chains against the simulated device's trust store: the system roots, then the user-installed roots
/// (the proxy CA and `--trust-ca` files), so callers can tell the two apart (CT and some EKU/validity rules differ,
/// reference §3.3/§3.5).
///
/// `@unchecked Sendable`: both X509_STOREs are filled in init and only read afterwards; OpenSSL locks stores
/// internally for lookups.
public final class TrustEvaluator: @unchecked Sendable {
    private let systemStore: OpaquePointer?
    private let userStore: OpaquePointer

    /// - Parameters:
    ///   - useSystemRoots: load the OS store (`X509_STORE_set_default_paths`, /etc/ssl/certs on Debian).
    ///   - userRoots: roots the user installed on the device.
    public init(useSystemRoots: Bool = true, userRoots: [Certificate] = []) throws(OpenSSLError) {
        let user = try checkNotNull("X509_STORE_new") { X509_STORE_new() }
        for root in userRoots { _ = X509_STORE_add_cert(user, root.x509) }
        ERR_clear_error()  // duplicates are harmless
        var system: OpaquePointer?
        if useSystemRoots {
            guard let s = X509_STORE_new() else {
                X509_STORE_free(user)
                throw OpenSSLError.drain("X509_STORE_new")
            }
            OpenSSLError.clear()
            // Load the system bundle into memory once. X509_STORE_set_default_paths would add a hashed-directory
            // lookup that reads /etc/ssl/certs on every verification that does not end at a system root (every
            // chain to a user root): milliseconds of directory scanning per connection.
            if let bundle = TrustEvaluator.systemBundlePath(), X509_STORE_load_file(s, bundle) == 1 {
                system = s
            } else if X509_STORE_set_default_paths(s) == 1 {
                system = s
            } else {
                X509_STORE_free(s)
                X509_STORE_free(user)
                throw OpenSSLError.drain("X509_STORE_set_default_paths")
            }
        }
        self.systemStore = system
        self.userStore = user
    }

    /// The system CA bundle file: `$SSL_CERT_FILE`, else OpenSSL's default (`/usr/lib/ssl/cert.pem` on Debian).
    static func systemBundlePath() -> String? {
        let variable = String(cString: X509_get_default_cert_file_env())
        if let override = ProcessInfo.processInfo.environment[variable], FileManager.default.fileExists(atPath: override) {
            return override
        }
        let path = String(cString: X509_get_default_cert_file())
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    deinit {
        if let systemStore { X509_STORE_free(systemStore) }
        X509_STORE_free(userStore)
    }

    /// Verifies `chain` (leaf first, as served) at `date`.
    public func evaluate(chain: [Certificate], at date: Date = Date()) -> TrustEvaluation {
        guard !chain.isEmpty else {
            return TrustEvaluation(result: .untrusted(.noCertificate), openSSLCode: -1, openSSLReason: "no certificate")
        }
        var window = ValidityWindow()
        for cert in chain { window.include(cert.x509) }
        var systemCode: Int32 = X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY
        if let systemStore {
            systemCode = verify(chain, store: systemStore, at: date, window: &window)
            if systemCode == X509_V_OK { return evaluation(.trustedBySystemRoot, X509_V_OK, window) }
        }
        let userCode = verify(chain, store: userStore, at: date, window: &window)
        if userCode == X509_V_OK { return evaluation(.trustedByUserRoot, X509_V_OK, window) }
        // If the chain reached a user root but failed for another reason (expired, bad signature…), that reason
        // is the real one; otherwise report what the system attempt found.
        let code = TrustEvaluator.isAnchorMissing(userCode) ? systemCode : userCode
        return evaluation(.untrusted(TrustEvaluator.failure(code)), code, window)
    }

    private func evaluation(_ result: TrustResult, _ code: Int32, _ window: ValidityWindow) -> TrustEvaluation {
        TrustEvaluation(
            result: result, openSSLCode: Int(code),
            openSSLReason: String(cString: X509_verify_cert_error_string(Int(code))), validFrom: window.from,
            validUntil: window.until)
    }

    private func verify(_ chain: [Certificate], store: OpaquePointer, at date: Date, window: inout ValidityWindow)
        -> Int32
    {
        guard let ctx = X509_STORE_CTX_new() else { return X509_V_ERR_OUT_OF_MEM }
        defer { X509_STORE_CTX_free(ctx) }
        guard let untrusted = copenssl_sk_X509_new_null() else { return X509_V_ERR_OUT_OF_MEM }
        defer { copenssl_sk_X509_free(untrusted) }  // the stack does not own the certificates
        for cert in chain.dropFirst() { _ = copenssl_sk_X509_push(untrusted, cert.x509) }
        guard X509_STORE_CTX_init(ctx, store, chain[0].x509, untrusted) == 1 else {
            ERR_clear_error()
            return X509_V_ERR_UNSPECIFIED
        }
        X509_STORE_CTX_set_time(ctx, 0, time_t(date.timeIntervalSince1970))
        _ = X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER)
        let ok = X509_verify_cert(ctx)
        ERR_clear_error()
        // The path it built (partial when it failed) may hold store certificates the server did not send: the anchor.
        if let built = X509_STORE_CTX_get0_chain(ctx) {
            for i in 0..<copenssl_sk_X509_num(built) {
                if let x = copenssl_sk_X509_value(built, i) { window.include(x) }
            }
        }
        return ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx)
    }

    /// The intersection of certificates' validity periods.
    private struct ValidityWindow {
        var from = Date.distantPast
        var until = Date.distantFuture

        mutating func include(_ x509: OpaquePointer) {
            from = max(from, CertificateInspector.date(X509_get0_notBefore(x509)))
            until = min(until, CertificateInspector.date(X509_get0_notAfter(x509)))
        }
    }

    private static func isAnchorMissing(_ code: Int32) -> Bool {
        [
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
            X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
            X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, X509_V_ERR_CERT_UNTRUSTED,
        ].contains(code)
    }

    /// Maps `X509_V_ERR_*` to the reasons iOS trust evaluation distinguishes.
    static func failure(_ code: Int32) -> TrustFailure {
        switch code {
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT: .selfSigned
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
            X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE,
            X509_V_ERR_CERT_UNTRUSTED:
            .unknownRoot
        case X509_V_ERR_CERT_HAS_EXPIRED: .expired
        case X509_V_ERR_CERT_NOT_YET_VALID: .notYetValid
        case X509_V_ERR_CERT_SIGNATURE_FAILURE, X509_V_ERR_UNABLE_TO_DECRYPT_CERT_SIGNATURE,
            X509_V_ERR_UNABLE_TO_DECODE_ISSUER_PUBLIC_KEY:
            .badSignature
        case X509_V_ERR_CERT_REVOKED: .revoked
        case X509_V_ERR_INVALID_CA, X509_V_ERR_PATH_LENGTH_EXCEEDED, X509_V_ERR_INVALID_PURPOSE,
            X509_V_ERR_CERT_CHAIN_TOO_LONG:
            .invalidChain
        default: .other
        }
    }
}
