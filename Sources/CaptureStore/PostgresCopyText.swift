/// Rows in the text format of PostgreSQL's `COPY … FROM STDIN`: values separated by tabs, rows ended by a newline,
/// NULL as `\N`, backslash, tab, newline and carriage return escaped, bytea as `\\x` and hex digits.
///
/// Text must be valid UTF-8 without NUL bytes, which PostgreSQL's `text` refuses and SQLite's keeps: such text
/// (a head with Latin-1 bytes) is stored with U+FFFD in place of each bad sequence and of each NUL, rather than have
/// the server refuse the whole batch.
struct PostgresCopyText {
    private(set) var bytes: [UInt8] = []
    private var atRowStart = true
    private(set) var rows = 0

    var isEmpty: Bool { rows == 0 }

    mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        atRowStart = true
        rows = 0
    }

    private mutating func separate() {
        if !atRowStart { bytes.append(UInt8(ascii: "\t")) }
        atRowStart = false
    }

    mutating func endRow() {
        bytes.append(UInt8(ascii: "\n"))
        atRowStart = true
        rows += 1
    }

    mutating func null() {
        separate()
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(UInt8(ascii: "N"))
    }

    mutating func int(_ value: Int64?) {
        guard let value else { return null() }
        separate()
        bytes.append(contentsOf: String(value).utf8)
    }

    mutating func real(_ value: Double?) {
        guard let value else { return null() }
        separate()
        let text = value.isNaN ? "NaN" : value == .infinity ? "Infinity" : value == -.infinity ? "-Infinity" : String(value)
        bytes.append(contentsOf: text.utf8)
    }

    mutating func text(_ value: String?) {
        guard var value else { return null() }
        value.withUTF8 { text(utf8: UnsafeRawBufferPointer($0)) }
    }

    mutating func text(utf8: UnsafeRawBufferPointer) {
        separate()
        if utf8.allSatisfy({ $0 != 0 && $0 < 0x80 }) {
            appendEscaped(utf8)
            return
        }
        // Repaired: invalid sequences become U+FFFD (String(decoding:) does that), and so does NUL.
        var repaired = String(decoding: utf8, as: UTF8.self)
        if repaired.utf8.contains(0) { repaired = repaired.replacingOccurrences(of: "\u{0}", with: "\u{FFFD}") }
        repaired.withUTF8 { appendEscaped(UnsafeRawBufferPointer($0)) }
    }

    mutating func bytea(_ value: UnsafeRawBufferPointer) {
        separate()
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(UInt8(ascii: "x"))
        let digits = Array("0123456789abcdef".utf8)
        bytes.reserveCapacity(bytes.count + value.count * 2)
        for byte in value {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0f)])
        }
    }

    /// A value of a capture batch.
    mutating func value(_ value: CaptureBatchReader.Value) {
        switch value {
        case .null: null()
        case .integer(let v): int(v)
        case .real(let v): real(v)
        case .text(let utf8): text(utf8: utf8)
        }
    }

    private mutating func appendEscaped(_ utf8: UnsafeRawBufferPointer) {
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "\\"))
            case UInt8(ascii: "\n"): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "n"))
            case UInt8(ascii: "\r"): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "r"))
            case UInt8(ascii: "\t"): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "t"))
            default: bytes.append(byte)
            }
        }
    }
}
