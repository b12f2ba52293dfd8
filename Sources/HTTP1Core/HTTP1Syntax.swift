/// Byte classes from RFC 9110 §5.6 and RFC 9112, as lookup tables for the hot path.
enum HTTP1Syntax {
    /// tchar: the characters allowed in tokens (method names, header names).
    static let tokenTable: [Bool] = (0..<256).map { b in
        switch UInt8(b) {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(UInt8(b))
        }
    }

    @inline(__always) static func isToken(_ b: UInt8) -> Bool { tokenTable[Int(b)] }

    /// field-vchar / SP / HTAB / obs-text: what a header value may contain (no CTLs, no DEL).
    @inline(__always) static func isFieldValueByte(_ b: UInt8) -> Bool {
        b == 0x09 || (b >= 0x20 && b != 0x7F)
    }

    /// Request-target bytes: visible ASCII and obs-text, but no whitespace or controls.
    @inline(__always) static func isTargetByte(_ b: UInt8) -> Bool { b > 0x20 && b != 0x7F }

    static func isSchemeChar(_ b: UInt8) -> Bool {
        (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2B || b == 0x2D || b == 0x2E
    }

    /// Characters accepted in a host (reg-name, IPv4, or IPv6 literal content).
    static func isHostChar(_ b: UInt8) -> Bool {
        isToken(b) || b == UInt8(ascii: ":") || b == UInt8(ascii: "%")
    }

    /// Decodes header bytes to a String. Valid UTF-8 is kept as is; anything else is read as ISO-8859-1 so that no
    /// byte is lost or replaced (obs-text, RFC 9110 §5.5).
    static func string(_ bytes: ArraySlice<UInt8>) -> String {
        var ascii = true
        for b in bytes where b >= 0x80 {
            ascii = false
            break
        }
        if ascii { return String(decoding: bytes, as: UTF8.self) }
        if let s = String(validating: bytes, as: UTF8.self) { return s }
        return String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
    }
}
