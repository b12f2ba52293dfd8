/// An HTTP/2 error code as carried by RST_STREAM and GOAWAY (RFC 9113 §7).
///
/// A struct rather than an enum so that codes outside the registry survive a round trip.
public struct H2ErrorCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The 32-bit code as on the wire.
    public var rawValue: UInt32
    /// Wraps a wire code, registered or not.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// RFC 9113 §7 code 0x0.
    public static let noError = H2ErrorCode(rawValue: 0x0)
    /// RFC 9113 §7 code 0x1.
    public static let protocolError = H2ErrorCode(rawValue: 0x1)
    /// RFC 9113 §7 code 0x2.
    public static let internalError = H2ErrorCode(rawValue: 0x2)
    /// RFC 9113 §7 code 0x3.
    public static let flowControlError = H2ErrorCode(rawValue: 0x3)
    /// RFC 9113 §7 code 0x4.
    public static let settingsTimeout = H2ErrorCode(rawValue: 0x4)
    /// RFC 9113 §7 code 0x5.
    public static let streamClosed = H2ErrorCode(rawValue: 0x5)
    /// RFC 9113 §7 code 0x6.
    public static let frameSizeError = H2ErrorCode(rawValue: 0x6)
    /// RFC 9113 §7 code 0x7.
    public static let refusedStream = H2ErrorCode(rawValue: 0x7)
    /// RFC 9113 §7 code 0x8.
    public static let cancel = H2ErrorCode(rawValue: 0x8)
    /// RFC 9113 §7 code 0x9.
    public static let compressionError = H2ErrorCode(rawValue: 0x9)
    /// RFC 9113 §7 code 0xa.
    public static let connectError = H2ErrorCode(rawValue: 0xa)
    /// RFC 9113 §7 code 0xb.
    public static let enhanceYourCalm = H2ErrorCode(rawValue: 0xb)
    /// RFC 9113 §7 code 0xc.
    public static let inadequateSecurity = H2ErrorCode(rawValue: 0xc)
    /// RFC 9113 §7 code 0xd.
    public static let http11Required = H2ErrorCode(rawValue: 0xd)

    /// The RFC name, e.g. `PROTOCOL_ERROR`, or the hex value for unregistered codes.
    public var description: String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR",
            "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return rawValue < names.count ? names[Int(rawValue)] : "0x\(String(rawValue, radix: 16))"
    }
}
