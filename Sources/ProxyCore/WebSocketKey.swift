import Foundation
import TLSCore

/// The WebSocket opening handshake's key and accept value (RFC 6455 §4.1, §4.2.2), for an HTTP/2 WebSocket (RFC
/// 8441, which has no key) relayed to an HTTP/1.1 origin.
enum WebSocketKey {
    /// A fresh Sec-WebSocket-Key: 16 random bytes, base64.
    static func make() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString()
    }

    /// The Sec-WebSocket-Accept a server answers `key` with: base64(SHA-1(key + GUID)).
    static func accept(for key: String) -> String {
        Data(SHA1.digest(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
    }
}
