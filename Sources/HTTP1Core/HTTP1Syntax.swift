/// Byte classes from RFC 9110 §5.6 and RFC 9112, as small inline predicates for the hot path.
enum HTTP1Syntax {
    /// tchar (RFC 9110 §5.6.2): the characters allowed in tokens (method names, header names). A switch rather than
    /// a lookup table: a global table costs a lazy-initialisation check on every byte.
    @inline(__always) static func isToken(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A:
            return true
        // ! # $ % & ' * + - . ^ _ ` | ~
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E:
            return true
        default:
            return false
        }
    }

    /// field-vchar / SP / HTAB / obs-text: what a header value may contain (no CTLs, no DEL).
    @inline(__always) static func isFieldValueByte(_ b: UInt8) -> Bool {
        b == 0x09 || (b >= 0x20 && b != 0x7F)
    }

    /// 0 for every tchar byte, 1 for every other byte: `allTokenBytes` reads one entry per name byte.
    static let nonTokenTable: [UInt8] = (0...255).map { isToken(UInt8($0)) ? 0 : 1 }

    /// True when every byte of `b[from..<to]` is a tchar; `table` is `nonTokenTable`'s storage, fetched once per head
    /// rather than once per name (a global costs an initialisation check on every access).
    @inline(__always) static func allTokenBytes(
        _ b: UnsafeBufferPointer<UInt8>, from: Int, to: Int, table: UnsafePointer<UInt8>
    ) -> Bool {
        var bad: UInt8 = 0
        for i in from..<to { bad |= table[Int(b[i])] }
        return bad == 0
    }

    /// True when every byte of `b[from..<to]` may appear in a field value: no control byte other than HTAB, no DEL.
    /// Eight bytes at a time, falling back to single bytes only for a word that holds a control byte or DEL (the
    /// usual HTAB-free value never does): a head's values are most of its bytes.
    @inline(__always) static func allFieldValueBytes(_ b: UnsafeBufferPointer<UInt8>, from: Int, to: Int) -> Bool {
        guard let base = b.baseAddress else { return true }
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var i = from
        while i + 8 <= to {
            let v = raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            // Some byte below 0x20 (exact as a yes/no for bounds up to 0x80), or some byte equal to 0x7F.
            let below = (v &- ones &* 0x20) & ~v & highs
            let del = v ^ (ones &* 0x7F)
            let isDel = (del &- ones) & ~del & highs
            if below | isDel != 0 {
                for j in i..<(i + 8) where !isFieldValueByte(base[j]) { return false }
            }
            i += 8
        }
        while i < to {
            if !isFieldValueByte(base[i]) { return false }
            i += 1
        }
        return true
    }

    /// A field value with no HTAB, control byte or DEL inside, read from `from` (just after the colon) in one pass:
    /// leading SP skipped, then eight bytes at a time up to the first byte below 0x20 or equal to 0x7F, which must
    /// end the line (CR LF, or LF with `bareLF`); trailing SP trimmed. nil for any other value: the caller checks
    /// those rule by rule. `b[to - 1]` must be LF, which bounds every scan.
    @inline(__always) static func plainFieldValue(
        _ b: UnsafeBufferPointer<UInt8>, from: Int, to: Int
    ) -> (start: Int, end: Int, next: Int, bareLF: Bool)? {
        let base = b.baseAddress.unsafelyUnwrapped
        var start = from
        while base[start] == 0x20 { start += 1 }
        let raw = UnsafeRawPointer(base)
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        var stop = start
        while true {
            guard stop + 8 <= to else {
                while base[stop] >= 0x20 && base[stop] != 0x7F { stop += 1 }
                break
            }
            let v = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: stop, as: UInt64.self))
            // The lowest flagged byte is a real match in both tests (a borrow only flags bytes above it).
            let below = (v &- ones &* 0x20) & ~v & highs
            let del = v ^ (ones &* 0x7F)
            let flagged = below | ((del &- ones) & ~del & highs)
            if flagged != 0 {
                stop += flagged.trailingZeroBitCount >> 3
                break
            }
            stop += 8
        }
        let next: Int
        let bareLF: Bool
        switch base[stop] {
        case 0x0A:
            next = stop + 1
            bareLF = true
        case 0x0D where base[stop + 1] == 0x0A:
            next = stop + 2
            bareLF = false
        default:
            return nil
        }
        var end = stop
        while end > start && base[end - 1] == 0x20 { end -= 1 }
        return (start, end, next, bareLF)
    }

    /// The index of the first `byte` in `b[from..<to]`, eight bytes at a time (the zero-byte test on the word
    /// XOR-ed with the pattern: the lowest flagged byte is always a real match).
    @inline(__always) static func firstIndex(of byte: UInt8, in b: UnsafeBufferPointer<UInt8>, from: Int, to: Int) -> Int? {
        guard let base = b.baseAddress else { return nil }
        let raw = UnsafeRawPointer(base)
        let pattern = UInt64(byte) &* 0x0101_0101_0101_0101
        var i = from
        while i + 8 <= to {
            let v = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) ^ pattern
            let zero = (v &- 0x0101_0101_0101_0101) & ~v & 0x8080_8080_8080_8080
            if zero != 0 { return i + zero.trailingZeroBitCount >> 3 }
            i += 8
        }
        while i < to {
            if base[i] == byte { return i }
            i += 1
        }
        return nil
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

    /// Decodes header bytes to a String, losslessly (FieldBytes: valid UTF-8 as is, any other byte escaped), so that
    /// serializing the String gives the same bytes back (obs-text, RFC 9110 §5.5).
    static func string(_ bytes: ArraySlice<UInt8>) -> String {
        FieldBytes.string(bytes)
    }
}
