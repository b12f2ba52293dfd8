internal import COpenSSL
import Foundation

/// SHA-256 helpers for fingerprints and pins.
enum Digest {
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &out, &length, EVP_sha256(), nil) }
        return Array(out.prefix(Int(length)))
    }

    static func hex(_ bytes: [UInt8], separator: String = "") -> String {
        bytes.map { b in
            let s = String(b, radix: 16, uppercase: true)
            return s.count == 1 ? "0" + s : s
        }.joined(separator: separator)
    }

    static func base64(_ bytes: [UInt8]) -> String { Data(bytes).base64EncodedString() }
}

/// SHA-1, for protocols that name it (the WebSocket handshake's Sec-WebSocket-Accept, RFC 6455 §4.2.2); never
/// for certificates or pins.
public enum SHA1 {
    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        _ = bytes.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &out, &length, EVP_sha1(), nil) }
        return Array(out.prefix(Int(length)))
    }
}
