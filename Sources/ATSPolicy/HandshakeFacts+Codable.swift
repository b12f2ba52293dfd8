import FoundationEssentials

// The JSON shapes of the handshake types, as `--log-json`, `diagnose --json` and `explain --json` write them. A
// case with a payload is an object with a `kind` and named fields, not Swift's `{"alertReceived":{"_0":70}}`;
// codes stay numbers, with their names next to them for readers.

extension HandshakeFailure: Codable {
    private enum Kind: String, Codable { case alertReceived, localError, closedDuringHandshake, notTLS, timedOut }
    private enum CodingKeys: String, CodingKey { case kind, alert, alertName, message }

    /// `{"kind":"alertReceived","alert":70,"alertName":"protocol_version"}`, `{"kind":"localError","message":…}`,
    /// or `{"kind":"closedDuringHandshake"}`, `{"kind":"notTLS"}`, `{"kind":"timedOut"}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .alertReceived(let code):
            try c.encode(Kind.alertReceived, forKey: .kind)
            try c.encode(code, forKey: .alert)
            try c.encode(TLSAlert(code).name, forKey: .alertName)
        case .localError(let message):
            try c.encode(Kind.localError, forKey: .kind)
            try c.encode(message, forKey: .message)
        case .closedDuringHandshake: try c.encode(Kind.closedDuringHandshake, forKey: .kind)
        case .notTLS: try c.encode(Kind.notTLS, forKey: .kind)
        case .timedOut: try c.encode(Kind.timedOut, forKey: .kind)
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        switch try c.decode(Kind.self, forKey: .kind) {
        case .alertReceived: self = .alertReceived(try c.decode(UInt8.self, forKey: .alert))
        case .localError: self = .localError(try c.decode(String.self, forKey: .message))
        case .closedDuringHandshake: self = .closedDuringHandshake
        case .notTLS: self = .notTLS
        case .timedOut: self = .timedOut
        }
    }
}

extension TrustResult: Codable {
    private enum Kind: String, Codable { case trustedBySystemRoot, trustedByUserRoot, untrusted }
    private enum CodingKeys: String, CodingKey { case kind, failure }

    /// `{"kind":"trustedBySystemRoot"}`, `{"kind":"trustedByUserRoot"}` or `{"kind":"untrusted","failure":"expired"}`.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .trustedBySystemRoot: try c.encode(Kind.trustedBySystemRoot, forKey: .kind)
        case .trustedByUserRoot: try c.encode(Kind.trustedByUserRoot, forKey: .kind)
        case .untrusted(let failure):
            try c.encode(Kind.untrusted, forKey: .kind)
            try c.encode(failure, forKey: .failure)
        }
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        switch try c.decode(Kind.self, forKey: .kind) {
        case .trustedBySystemRoot: self = .trustedBySystemRoot
        case .trustedByUserRoot: self = .trustedByUserRoot
        case .untrusted: self = .untrusted(try c.decode(TrustFailure.self, forKey: .failure))
        }
    }
}

extension HandshakeFacts: Codable {
    private enum CodingKeys: String, CodingKey {
        case failure, version, versionName, cipherSuiteCode, cipherSuiteName, keyExchangeGroup, alpn, chain, trust,
            hostnameMatches, observedAt, serverCapabilities
    }

    /// The stored fields, plus `versionName` (`TLSv1.2`) next to the wire code `version` (771). Absent values are
    /// left out.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(failure, forKey: .failure)
        try c.encodeIfPresent(version, forKey: .version)
        try c.encodeIfPresent(version?.plistName, forKey: .versionName)
        try c.encodeIfPresent(cipherSuiteCode, forKey: .cipherSuiteCode)
        try c.encodeIfPresent(cipherSuiteName, forKey: .cipherSuiteName)
        try c.encodeIfPresent(keyExchangeGroup, forKey: .keyExchangeGroup)
        try c.encodeIfPresent(alpn, forKey: .alpn)
        try c.encode(chain, forKey: .chain)
        try c.encode(trust, forKey: .trust)
        try c.encode(hostnameMatches, forKey: .hostnameMatches)
        try c.encode(observedAt, forKey: .observedAt)
        try c.encodeIfPresent(serverCapabilities, forKey: .serverCapabilities)
    }

    /// Reads what `encode(to:)` writes; `versionName` is derived, so it is not read.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            failure: try c.decodeIfPresent(HandshakeFailure.self, forKey: .failure),
            version: try c.decodeIfPresent(TLSVersion.self, forKey: .version),
            cipherSuiteCode: try c.decodeIfPresent(UInt16.self, forKey: .cipherSuiteCode),
            cipherSuiteName: try c.decodeIfPresent(String.self, forKey: .cipherSuiteName),
            keyExchangeGroup: try c.decodeIfPresent(String.self, forKey: .keyExchangeGroup),
            alpn: try c.decodeIfPresent(String.self, forKey: .alpn),
            chain: try c.decode([CertificateFacts].self, forKey: .chain),
            trust: try c.decode(TrustResult.self, forKey: .trust),
            hostnameMatches: try c.decode(Bool.self, forKey: .hostnameMatches),
            observedAt: try c.decode(Date.self, forKey: .observedAt),
            serverCapabilities: try c.decodeIfPresent(ServerCapabilities.self, forKey: .serverCapabilities))
    }
}

extension ServerCapabilities: Codable {
    private enum CodingKeys: String, CodingKey {
        case supportedVersions, supportedVersionNames, preferredCipherCode, preferredCipherName, supportsForwardSecrecy
    }

    /// The stored fields, plus `supportedVersionNames` (`["TLSv1.0"]`) next to the wire codes.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(supportedVersions, forKey: .supportedVersions)
        try c.encode(supportedVersions.map(\.plistName), forKey: .supportedVersionNames)
        try c.encodeIfPresent(preferredCipherCode, forKey: .preferredCipherCode)
        try c.encodeIfPresent(preferredCipherName, forKey: .preferredCipherName)
        try c.encode(supportsForwardSecrecy, forKey: .supportsForwardSecrecy)
    }

    /// Reads what `encode(to:)` writes; the names are derived, so they are not read.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            supportedVersions: try c.decode([TLSVersion].self, forKey: .supportedVersions),
            preferredCipherCode: try c.decodeIfPresent(UInt16.self, forKey: .preferredCipherCode),
            preferredCipherName: try c.decodeIfPresent(String.self, forKey: .preferredCipherName),
            supportsForwardSecrecy: try c.decode(Bool.self, forKey: .supportsForwardSecrecy))
    }
}
