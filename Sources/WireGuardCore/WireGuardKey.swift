import Foundation

/// A WireGuard key pair (X25519): 32-byte keys, shown in WireGuard's base64 form in configurations.
///
/// The private key is never part of `description`, so interpolating a key pair into a log line shows only the
/// public key.
public struct WireGuardKeyPair: Sendable, CustomStringConvertible {
    public let privateKey: [UInt8]
    public let publicKey: [UInt8]

    /// The pair of a 32-byte private key; nil when it is not 32 bytes.
    public init?(privateKey: [UInt8]) {
        guard let publicKey = WireGuardCrypto.publicKey(privateKey: privateKey) else { return nil }
        self.privateKey = privateKey
        self.publicKey = publicKey
    }

    /// A new pair from OpenSSL's CSPRNG; nil if it cannot deliver.
    public static func generate() -> WireGuardKeyPair? {
        WireGuardCrypto.randomBytes(32).flatMap { WireGuardKeyPair(privateKey: $0) }
    }

    /// The private key in base64, as `PrivateKey =` of a wg-quick file.
    public var privateKeyBase64: String { Self.base64(privateKey) }
    /// The public key in base64, as `PublicKey =` and `wg show`.
    public var publicKeyBase64: String { Self.base64(publicKey) }

    /// A key in WireGuard's text form.
    public static func base64(_ key: [UInt8]) -> String { Data(key).base64EncodedString() }

    public var description: String { "WireGuard key pair (public \(publicKeyBase64))" }

    /// 32 bytes from base64 text (whitespace around it ignored); nil otherwise.
    public static func decode(base64 text: String) -> [UInt8]? {
        guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)),
            data.count == 32
        else { return nil }
        return Array(data)
    }
}
