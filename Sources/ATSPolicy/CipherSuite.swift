/// A TLS cipher suite as ATS lists it: IANA name, wire code and OpenSSL's name (reference §3.2, checked with
/// `openssl ciphers -V` on OpenSSL 3.0.19).
public struct CipherSuite: Sendable, Hashable, Codable, CustomStringConvertible {
    public let ianaName: String
    public let code: UInt16
    public let openSSLName: String
    /// True for TLS 1.3 suites (configured with `SSL_CTX_set_ciphersuites`, not the cipher list).
    public let isTLS13: Bool
    /// True when the key exchange is ephemeral (ECDHE or TLS 1.3), i.e. forward secret.
    public let isForwardSecret: Bool

    public var description: String { ianaName }

    /// `0xC02F`-style hex code.
    public var hexCode: String {
        let h = String(code, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - h.count)) + h
    }
}

/// Which published list of ATS suites a profile offers (reference §3.2 columns).
public enum CipherSuiteEra: String, Sendable, Codable {
    /// Apple's 2015 tech note list (iOS 9/10): no TLS 1.3, no ChaCha20, no ECDHE-RSA-AES256-CBC-SHA.
    case doc2015
    /// Security-59306…60157 (iOS 13–15 era): adds TLS 1.3 and ChaCha20.
    case src2020
    /// Security-60158.100.133 onwards (iOS 16+): CBC-SHA256/384 removed.
    case current
}

extension CipherSuite {
    private static func s(
        _ iana: String, _ code: UInt16, _ ossl: String, tls13: Bool = false, pfs: Bool = true
    ) -> CipherSuite {
        CipherSuite(ianaName: iana, code: code, openSSLName: ossl, isTLS13: tls13, isForwardSecret: pfs)
    }

    // ATS PFS group, in Apple's order (TLS 1.3 suites first).
    static let aes128GCM13 = s("TLS_AES_128_GCM_SHA256", 0x1301, "TLS_AES_128_GCM_SHA256", tls13: true)
    static let aes256GCM13 = s("TLS_AES_256_GCM_SHA384", 0x1302, "TLS_AES_256_GCM_SHA384", tls13: true)
    static let chacha13 = s("TLS_CHACHA20_POLY1305_SHA256", 0x1303, "TLS_CHACHA20_POLY1305_SHA256", tls13: true)
    static let ecdsa256GCM = s("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", 0xC02C, "ECDHE-ECDSA-AES256-GCM-SHA384")
    static let ecdsa128GCM = s("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", 0xC02B, "ECDHE-ECDSA-AES128-GCM-SHA256")
    static let ecdsaChacha = s(
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", 0xCCA9, "ECDHE-ECDSA-CHACHA20-POLY1305")
    static let rsa256GCM = s("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", 0xC030, "ECDHE-RSA-AES256-GCM-SHA384")
    static let rsa128GCM = s("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", 0xC02F, "ECDHE-RSA-AES128-GCM-SHA256")
    static let rsaChacha = s("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", 0xCCA8, "ECDHE-RSA-CHACHA20-POLY1305")
    static let ecdsa256CBC384 = s("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384", 0xC024, "ECDHE-ECDSA-AES256-SHA384")
    static let ecdsa128CBC256 = s("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", 0xC023, "ECDHE-ECDSA-AES128-SHA256")
    static let ecdsa256CBC = s("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", 0xC00A, "ECDHE-ECDSA-AES256-SHA")
    static let ecdsa128CBC = s("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", 0xC009, "ECDHE-ECDSA-AES128-SHA")
    static let rsa256CBC384 = s("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384", 0xC028, "ECDHE-RSA-AES256-SHA384")
    static let rsa128CBC256 = s("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", 0xC027, "ECDHE-RSA-AES128-SHA256")
    static let rsa256CBC = s("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", 0xC014, "ECDHE-RSA-AES256-SHA")
    static let rsa128CBC = s("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", 0xC013, "ECDHE-RSA-AES128-SHA")

    // Compatibility group (NSExceptionRequiresForwardSecrecy = NO): static RSA key exchange.
    static let plain256GCM = s("TLS_RSA_WITH_AES_256_GCM_SHA384", 0x009D, "AES256-GCM-SHA384", pfs: false)
    static let plain128GCM = s("TLS_RSA_WITH_AES_128_GCM_SHA256", 0x009C, "AES128-GCM-SHA256", pfs: false)
    static let plain256CBC256 = s("TLS_RSA_WITH_AES_256_CBC_SHA256", 0x003D, "AES256-SHA256", pfs: false)
    static let plain128CBC256 = s("TLS_RSA_WITH_AES_128_CBC_SHA256", 0x003C, "AES128-SHA256", pfs: false)
    static let plain256CBC = s("TLS_RSA_WITH_AES_256_CBC_SHA", 0x0035, "AES256-SHA", pfs: false)
    static let plain128CBC = s("TLS_RSA_WITH_AES_128_CBC_SHA", 0x002F, "AES128-SHA", pfs: false)

    /// Every suite this table knows, for looking up a negotiated code.
    public static let all: [CipherSuite] = [
        aes128GCM13, aes256GCM13, chacha13, ecdsa256GCM, ecdsa128GCM, ecdsaChacha, rsa256GCM, rsa128GCM, rsaChacha,
        ecdsa256CBC384, ecdsa128CBC256, ecdsa256CBC, ecdsa128CBC, rsa256CBC384, rsa128CBC256, rsa256CBC, rsa128CBC,
        plain256GCM, plain128GCM, plain256CBC256, plain128CBC256, plain256CBC, plain128CBC,
    ]

    /// The suite with this wire code, if ATS ever lists it.
    public static func lookup(code: UInt16) -> CipherSuite? { all.first { $0.code == code } }

    /// The ATS forward-secret group (`tls_ciphersuite_group_ats`) for an era, in offer order.
    public static func atsGroup(_ era: CipherSuiteEra) -> [CipherSuite] {
        switch era {
        case .doc2015:
            [ecdsa256GCM, ecdsa128GCM, rsa256GCM, rsa128GCM, ecdsa256CBC384, ecdsa128CBC256, ecdsa256CBC, ecdsa128CBC,
             rsa256CBC384, rsa128CBC256, rsa128CBC]
        case .src2020:
            [aes128GCM13, aes256GCM13, chacha13, ecdsa256GCM, ecdsa128GCM, ecdsaChacha, rsa256GCM, rsa128GCM,
             rsaChacha, ecdsa256CBC384, ecdsa128CBC256, ecdsa256CBC, ecdsa128CBC, rsa256CBC384, rsa128CBC256,
             rsa256CBC, rsa128CBC]
        case .current:
            [aes128GCM13, aes256GCM13, chacha13, ecdsa256GCM, ecdsa128GCM, ecdsaChacha, rsa256GCM, rsa128GCM,
             rsaChacha, ecdsa256CBC, ecdsa128CBC, rsa256CBC, rsa128CBC]
        }
    }

    /// The compatibility group (`tls_ciphersuite_group_ats_compatibility`) added when forward secrecy is not
    /// required; Apple offers it *before* the ATS group (src S1, S3). The 2015 note has no separate list, so
    /// `doc2015` uses the 2020 list (inferred).
    public static func compatibilityGroup(_ era: CipherSuiteEra) -> [CipherSuite] {
        switch era {
        case .doc2015, .src2020:
            [plain256GCM, plain128GCM, plain256CBC256, plain128CBC256, plain256CBC, plain128CBC]
        case .current:
            [plain256GCM, plain128GCM, plain256CBC, plain128CBC]
        }
    }
}
