extension IOSProfile {
    /// Every TLS version the profile's URL-loading stack can speak, lowest first, before any ATS minimum.
    /// iOS 9/10: TLS 1.0–1.2 (no TLS 1.3 before iOS 12.2, doc A17); iOS 14/17: 1.0–1.3; iOS 26: 1.2–1.3
    /// (TLS 1.0/1.1 refused even with an exception, reference §1.2 / X2, secondary source).
    public var stackVersions: [TLSVersion] {
        switch self {
        case .ios9, .ios10: [.tls10, .tls11, .tls12]
        case .ios14, .ios17: [.tls10, .tls11, .tls12, .tls13]
        case .ios26: [.tls12, .tls13]
        }
    }

    /// Which published ATS cipher list the profile offers (reference §3.2 columns): the 2015 note for iOS 9/10,
    /// Security-59306…60157 for iOS 14, Security-60158+ for iOS 17 and 26.
    public var cipherSuiteEra: CipherSuiteEra {
        switch self {
        case .ios9, .ios10: .doc2015
        case .ios14: .src2020
        case .ios17, .ios26: .current
        }
    }

    /// The iOS 13 certificate rules (RSA ≥ 2048, SHA-2, SAN, serverAuth EKU, ≤ 825 days) hold for *every* TLS
    /// connection, ATS or not (reference §3.4, doc A16).
    public var hasIOS13TrustRules: Bool { self >= .ios14 }
}

extension CertificateRules {
    /// The checks on a connection: ATS minimums when `atsEnforced`, otherwise default trust for the profile.
    static func forConnection(
        profile: IOSProfile, atsEnforced: Bool, requiresCT: Bool, options: PolicyOptions
    ) -> CertificateRules {
        let modern = profile.hasIOS13TrustRules
        // Before iOS 13, default trust had no key-size or hash floor for leaves (SHA-1 leaves worked until iOS 11
        // for user-visible TLS); ATS added RSA 2048 / EC 256 / SHA-256 (src S1 `…with_ats_minimums`).
        let strong = atsEnforced || modern
        return CertificateRules(
            minimumRSABits: strong ? 2048 : 0, minimumECBits: strong ? 256 : 0, requiresSHA2: strong,
            requiresSANMatch: modern, requiresServerAuthEKU: modern, maximumValidityDaysSystemRoot: 398,
            maximumValidityDaysUserRoot: 825, requiresCertificateTransparency: requiresCT,
            enforcesValidityLimits: modern,
            requiresServerAuthEKUUnderUserRoot: modern && options.userRootEKU == .documentedStrict)
    }
}
