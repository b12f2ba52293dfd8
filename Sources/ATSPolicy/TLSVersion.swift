/// A TLS protocol version, ordered, with the spelling `NSExceptionMinimumTLSVersion` uses.
public enum TLSVersion: Int, Sendable, Codable, Comparable, CaseIterable, CustomStringConvertible {
    case tls10 = 0x0301
    case tls11 = 0x0302
    case tls12 = 0x0303
    case tls13 = 0x0304

    public static func < (a: TLSVersion, b: TLSVersion) -> Bool { a.rawValue < b.rawValue }

    /// The plist spelling: `TLSv1.0` … `TLSv1.3`.
    public var plistName: String {
        switch self {
        case .tls10: "TLSv1.0"
        case .tls11: "TLSv1.1"
        case .tls12: "TLSv1.2"
        case .tls13: "TLSv1.3"
        }
    }

    public var description: String { plistName }

    /// Parses the exact strings Apple's parser accepts (src S1): `TLSv1.0`…`TLSv1.3`; anything else is nil
    /// (and the default TLS 1.2 applies). The DTLS spellings are accepted by Apple but mean nothing over TCP.
    public init?(plistName: String) {
        switch plistName {
        case "TLSv1.0": self = .tls10
        case "TLSv1.1": self = .tls11
        case "TLSv1.2": self = .tls12
        case "TLSv1.3": self = .tls13
        default: return nil
        }
    }

    /// The wire code (0x0301…) as a TLS stack reports it.
    public init?(wireCode: Int) { self.init(rawValue: wireCode) }
}
