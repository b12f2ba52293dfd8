import ATSPolicy

/// Builds the client configurations for upstream connections: one that offers exactly what the simulated iOS
/// device would, and a permissive one for probing what a server supports.
public enum UpstreamTLS {
    /// Key-exchange groups an iOS client offers, in order (X25519, P-256, P-384).
    public static let iOSGroups = ["X25519", "P-256", "P-384"]

    /// The configuration of an upstream ClientHello "as iOS would send it" for `requirements`:
    /// - versions: from the lowest to the highest of `offeredVersions`;
    /// - suites: exactly `offeredCipherSuites` (TLS ≤1.2 list and TLS 1.3 ciphersuites set separately), or
    ///   OpenSSL's default list when the policy sets none;
    /// - groups X25519:P-256:P-384; ALPN as given; SNI is set per engine (the target host).
    ///
    /// Security level 0 and no in-handshake verification: OpenSSL must not refuse what iOS would accept (TLS 1.0
    /// under an exception, a 1024-bit key it then rejects *in trust evaluation*). The ATS verdict comes from
    /// `HandshakeFacts`, judged after the handshake.
    public static func iOSLikeConfiguration(for requirements: ConnectionRequirements, alpn: [String] = [])
        -> TLSConfiguration
    {
        var config = TLSConfiguration(role: .client, groups: iOSGroups, securityLevel: 0, alpnProtocols: alpn)
        let versions = requirements.offeredVersions.sorted()
        config.minimumVersion = versions.first ?? .tls12
        config.maximumVersion = versions.last ?? .tls13
        if let suites = requirements.offeredCipherSuites {
            let legacy = suites.filter { !$0.isTLS13 }.map(\.openSSLName)
            let modern = suites.filter(\.isTLS13).map(\.openSSLName)
            config.tls13CipherSuites = modern.joined(separator: ":")
            if legacy.isEmpty {
                // Only TLS 1.3 suites: a TLS 1.2 handshake could offer nothing, so do not offer TLS ≤1.2.
                config.minimumVersion = .tls13
                config.cipherList = nil
            } else {
                config.cipherList = legacy.joined(separator: ":")
            }
            if modern.isEmpty, let max = config.maximumVersion, max == .tls13 {
                config.maximumVersion = .tls12
            }
        }
        return config
    }

    /// What an iOS client with every exception offers (`--ats mirror`'s second attempt, so the suite the server
    /// chooses is the one it would choose for an iOS device): TLS 1.0–1.3, every suite Apple's ATS groups ever held,
    /// the forward-secret group first and the static-RSA compatibility group after it (Apple puts it first; after,
    /// a server that has forward secrecy shows it), groups as iOS, security level 0.
    public static func iOSWidestConfiguration(alpn: [String] = []) -> TLSConfiguration {
        let suites = CipherSuite.atsGroup(.src2020) + CipherSuite.compatibilityGroup(.src2020)
        return TLSConfiguration(
            role: .client, minimumVersion: .tls10, maximumVersion: .tls13,
            cipherList: suites.filter { !$0.isTLS13 }.map(\.openSSLName).joined(separator: ":"),
            tls13CipherSuites: suites.filter(\.isTLS13).map(\.openSSLName).joined(separator: ":"), groups: iOSGroups,
            securityLevel: 0, alpnProtocols: alpn)
    }

    /// A probe configuration that offers everything this OpenSSL can still negotiate: TLS 1.0–1.3 (or exactly
    /// `version`), `ALL` suites including static RSA, at security level 0 (so TLS 1.0, SHA-1 and 1024-bit keys
    /// work). With `forwardSecretOnly`, only ECDHE/DHE (and TLS 1.3) suites are offered.
    public static func permissiveProbeConfiguration(version: TLSVersion? = nil, forwardSecretOnly: Bool = false)
        -> TLSConfiguration
    {
        TLSConfiguration(
            role: .client, minimumVersion: version ?? .tls10, maximumVersion: version ?? .tls13,
            cipherList: forwardSecretOnly ? "kECDHE:kDHE" : "ALL", securityLevel: 0)
    }
}
