/// A TLS alert description (RFC 8446 §6, RFC 5246 §7.2), e.g. 70 `protocol_version`.
public struct TLSAlert: Sendable, Hashable, CustomStringConvertible {
    /// The alert description number on the wire.
    public let code: UInt8

    public init(_ code: UInt8) { self.code = code }

    /// RFC name of the alert (`protocol_version`), or `alert(N)` for numbers this table does not know.
    public var name: String { TLSAlert.names[code] ?? "alert(\(code))" }

    /// `protocol_version (70)`.
    public var description: String { "\(name) (\(code))" }

    public static let closeNotify = TLSAlert(0)
    public static let unexpectedMessage = TLSAlert(10)
    public static let badRecordMAC = TLSAlert(20)
    public static let handshakeFailure = TLSAlert(40)
    public static let badCertificate = TLSAlert(42)
    public static let unsupportedCertificate = TLSAlert(43)
    public static let certificateExpired = TLSAlert(45)
    public static let certificateUnknown = TLSAlert(46)
    public static let illegalParameter = TLSAlert(47)
    public static let unknownCA = TLSAlert(48)
    public static let decodeError = TLSAlert(50)
    public static let decryptError = TLSAlert(51)
    public static let protocolVersion = TLSAlert(70)
    public static let insufficientSecurity = TLSAlert(71)
    public static let internalError = TLSAlert(80)
    public static let userCanceled = TLSAlert(90)
    public static let unrecognizedName = TLSAlert(112)
    public static let noApplicationProtocol = TLSAlert(120)

    static let names: [UInt8: String] = [
        0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 21: "decryption_failed",
        22: "record_overflow", 30: "decompression_failure", 40: "handshake_failure", 41: "no_certificate",
        42: "bad_certificate", 43: "unsupported_certificate", 44: "certificate_revoked", 45: "certificate_expired",
        46: "certificate_unknown", 47: "illegal_parameter", 48: "unknown_ca", 49: "access_denied",
        50: "decode_error", 51: "decrypt_error", 60: "export_restriction", 70: "protocol_version",
        71: "insufficient_security", 80: "internal_error", 86: "inappropriate_fallback", 90: "user_canceled",
        100: "no_renegotiation", 109: "missing_extension", 110: "unsupported_extension",
        112: "unrecognized_name", 113: "bad_certificate_status_response", 115: "unknown_psk_identity",
        116: "certificate_required", 120: "no_application_protocol",
    ]
}

