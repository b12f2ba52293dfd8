/// Header field values are bytes (RFC 9110 §5.5: obs-text, a Latin-1 filename), but the proxy's types hold them as
/// Strings. This is the one lossless mapping between the two, used wherever a value is read off the wire (HTTP/1
/// parser, nghttp2's header callback) and written back (HTTP/1 serializer, nghttp2's name/value arrays):
///
/// - bytes that are valid UTF-8 are that String, unchanged (every ordinary value);
/// - any other value maps each byte of 0x80 or more to one scalar of the last 128 code points of Unicode,
///   U+10FF80 to U+10FFFF (plane 16's private use area, never sent in a real header), and back.
///
/// So a value crosses HTTP/1.1 and HTTP/2 legs byte for byte, where decoding it as UTF-8 would turn it into U+FFFD
/// and re-encoding it as Latin-1 would change its bytes. `display(_:)` shows such a value as Latin-1 for people.
public enum FieldBytes {
    /// The first of the 128 escape scalars (byte 0x80).
    static let escapeBase: UInt32 = 0x10FF00

    /// The String for a value's bytes.
    public static func string<C: Collection>(_ bytes: C) -> String where C.Element == UInt8 {
        var ascii = true
        for b in bytes where b >= 0x80 {
            ascii = false
            break
        }
        if ascii { return String(decoding: bytes, as: UTF8.self) }
        if let s = String(validating: bytes, as: UTF8.self) { return s }
        var scalars = String.UnicodeScalarView()
        for b in bytes {
            scalars.append(b < 0x80 ? Unicode.Scalar(b) : Unicode.Scalar(escapeBase + UInt32(b))!)
        }
        return String(scalars)
    }

    /// Whether `value` holds escaped bytes (its UTF-8 has 0xF4, the lead byte of plane 16).
    @inline(__always)
    static func hasEscapes(_ value: String) -> Bool {
        value.utf8.contains(0xF4)
    }

    /// Appends the bytes `value` stands for.
    public static func append(_ value: String, to out: inout [UInt8]) {
        guard hasEscapes(value) else {
            out.append(contentsOf: value.utf8)
            return
        }
        for scalar in value.unicodeScalars {
            if scalar.value >= escapeBase + 0x80 {
                out.append(UInt8(truncatingIfNeeded: scalar.value - escapeBase))
            } else {
                out.append(contentsOf: String(scalar).utf8)
            }
        }
    }

    /// Whether every byte `value` stands for satisfies `check` (without copying an ordinary value).
    static func allBytes(of value: String, satisfy check: (UInt8) -> Bool) -> Bool {
        hasEscapes(value) ? bytes(value).allSatisfy(check) : value.utf8.allSatisfy(check)
    }

    /// The bytes `value` stands for.
    public static func bytes(_ value: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(value.utf8.count)
        append(value, to: &out)
        return out
    }

    /// `value` for a console line or a capture: escaped bytes shown as their Latin-1 characters.
    public static func display(_ value: String) -> String {
        guard hasEscapes(value) else { return value }
        var scalars = String.UnicodeScalarView()
        for scalar in value.unicodeScalars {
            scalars.append(scalar.value >= escapeBase + 0x80 ? Unicode.Scalar(UInt8(scalar.value - escapeBase)) : scalar)
        }
        return String(scalars)
    }
}
