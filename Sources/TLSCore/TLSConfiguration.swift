import ATSPolicy

/// Everything a `TLSContext` is built from. A plain value; build one, then make an immutable `TLSContext`.
public struct TLSConfiguration: Sendable {
    /// Which side of the handshake the context serves.
    public enum Role: Sendable, Hashable { case client, server }

    /// A server's certificate chain (leaf first) and private key.
    public struct ServerIdentity: Sendable {
        public var chain: [Certificate]
        public var key: PrivateKey

        public init(chain: [Certificate], key: PrivateKey) {
            self.chain = chain
            self.key = key
        }
    }

    public var role: Role
    /// Lowest version offered/accepted; nil = OpenSSL's default.
    public var minimumVersion: TLSVersion?
    /// Highest version offered/accepted; nil = OpenSSL's default (TLS 1.3).
    public var maximumVersion: TLSVersion?
    /// TLS ≤1.2 cipher list in OpenSSL syntax (`ECDHE-RSA-AES128-GCM-SHA256:…` or `ALL`); nil = OpenSSL default.
    /// Do not put `@SECLEVEL` here; use `securityLevel`.
    public var cipherList: String?
    /// TLS 1.3 ciphersuites (`TLS_AES_128_GCM_SHA256:…`); nil = OpenSSL default, "" = none.
    public var tls13CipherSuites: String?
    /// Key-exchange groups in preference order (`X25519`, `P-256`, …); nil = OpenSSL default.
    public var groups: [String]?
    /// OpenSSL security level. 0 lets TLS 1.0/1.1, SHA-1 signatures and 1024-bit keys through (the probe and the
    /// iOS-like client use 0 so *ATS rules*, not OpenSSL's, decide). nil = the system default (2 on Debian 12).
    public var securityLevel: Int?
    /// Fail the handshake when the peer's chain does not verify. When false, the chain is still verified and
    /// judged afterwards (`CertificateInspector`).
    public var verifyPeer: Bool
    /// Trust the system root store (`SSL_CTX_set_default_verify_paths`).
    public var useSystemTrustStore: Bool
    /// Extra trusted roots (the proxy CA, `--trust-ca` files).
    public var additionalTrustRoots: [Certificate]
    /// ALPN: for clients the offered list in order; for servers the preference order used to choose from the
    /// client's list (an engine may override it per connection).
    public var alpnProtocols: [String]
    /// Servers: the default certificate and key.
    public var identity: ServerIdentity?
    /// Servers: picks a certificate per connection from the SNI name (nil when the client sent none). Returning
    /// nil keeps `identity`. Called on the thread running the handshake.
    public var certificateSelector: (@Sendable (_ serverName: String?) -> ServerIdentity?)?
    /// Session resumption. Off (the default), a client makes every handshake a full one that shows the real chain
    /// (what a probe needs), and a server keeps OpenSSL's defaults (no stateless tickets; stateful TLS 1.3 tickets
    /// and TLS 1.2 session IDs from the context's own cache). On, a server with a fixed `identity` issues stateless
    /// tickets and keeps a bounded cache of TLS 1.2 session IDs, bound to that identity (see `TLSContext`), and a
    /// client hands its sessions to the `TLSSessionCache` an engine was given (`TLSEngine.offerSession(from:key:)`)
    /// and offers them again.
    public var sessionResumption: Bool = false

    public init(
        role: Role, minimumVersion: TLSVersion? = nil, maximumVersion: TLSVersion? = nil, cipherList: String? = nil,
        tls13CipherSuites: String? = nil, groups: [String]? = nil, securityLevel: Int? = nil,
        verifyPeer: Bool = false, useSystemTrustStore: Bool = false, additionalTrustRoots: [Certificate] = [],
        alpnProtocols: [String] = [], identity: ServerIdentity? = nil,
        certificateSelector: (@Sendable (String?) -> ServerIdentity?)? = nil
    ) {
        self.role = role
        self.minimumVersion = minimumVersion
        self.maximumVersion = maximumVersion
        self.cipherList = cipherList
        self.tls13CipherSuites = tls13CipherSuites
        self.groups = groups
        self.securityLevel = securityLevel
        self.verifyPeer = verifyPeer
        self.useSystemTrustStore = useSystemTrustStore
        self.additionalTrustRoots = additionalTrustRoots
        self.alpnProtocols = alpnProtocols
        self.identity = identity
        self.certificateSelector = certificateSelector
    }

    /// A client configuration with defaults.
    public static func client(alpn: [String] = []) -> TLSConfiguration {
        TLSConfiguration(role: .client, alpnProtocols: alpn)
    }

    /// A server configuration presenting `identity`.
    public static func server(identity: ServerIdentity, alpn: [String] = []) -> TLSConfiguration {
        TLSConfiguration(role: .server, alpnProtocols: alpn, identity: identity)
    }
}

extension TLSVersion {
    /// OpenSSL's `TLS1_x_VERSION` number (same as the wire code).
    var openSSLVersion: Int32 { Int32(rawValue) }
}
