/// A JSON value whose object members keep the order they were added in, so documents read in their spec's field
/// order and come out byte for byte the same each time (golden tests, diffs between runs): HAR exports, the web
/// view's entries, lint's JSON and SARIF reports. Written by hand rather than with `JSONEncoder`, which neither keeps
/// key order nor writes a number such as 12.5 as exactly that.
public indirect enum JSONValue: Sendable, Equatable {
    case string(String)
    case int(Int)
    /// Milliseconds and the like: written with at most three decimals, without trailing zeros.
    case double(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([Member])

    /// One `"key": value` of an object.
    public struct Member: Sendable, Equatable {
        public var key: String
        public var value: JSONValue

        public init(_ key: String, _ value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// An object from `(key, value)` pairs, in order.
    public static func fields(_ pairs: [(String, JSONValue)]) -> JSONValue {
        .object(pairs.map { Member($0.0, $0.1) })
    }

    /// Pretty-printed with two spaces per level, starting at `level` (for an entry written inside a document).
    public func rendered(level: Int = 0) -> String {
        var out = ""
        write(into: &out, level: level)
        return out
    }

    /// On one line, without spaces: for a live view sending one entry at a time, or JSON Lines.
    public func compact() -> String {
        var out = ""
        write(into: &out, level: nil)
        return out
    }

    /// The member `key` of an object; nil for other values or a missing key.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// Pretty-printed at `level`, or compact when `level` is nil.
    private func write(into out: inout String, level: Int?) {
        let inner = level.map { $0 + 1 }
        switch self {
        case .string(let s): Self.quote(s, into: &out)
        case .int(let n): out += String(n)
        case .double(let d): out += Self.number(d)
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        case .array(let items):
            Self.writeContainer("[", "]", count: items.count, level: level, into: &out) { i, out in
                items[i].write(into: &out, level: inner)
            }
        case .object(let members):
            Self.writeContainer("{", "}", count: members.count, level: level, into: &out) { i, out in
                Self.quote(members[i].key, into: &out)
                out += level == nil ? ":" : ": "
                members[i].value.write(into: &out, level: inner)
            }
        }
    }

    /// An array's or object's brackets, separators and indentation around its `count` items, each written by
    /// `item`: compact (`[1,2]`) when `level` is nil, else one item per line indented one level deeper, and `[]`
    /// or `{}` when empty.
    private static func writeContainer(
        _ open: String, _ close: String, count: Int, level: Int?, into out: inout String,
        item: (Int, inout String) -> Void
    ) {
        guard let level, count > 0 else {
            out += open
            for i in 0..<count {
                if i > 0 { out += "," }
                item(i, &out)
            }
            out += close
            return
        }
        let pad = String(repeating: "  ", count: level + 1)
        out += open + "\n"
        for i in 0..<count {
            out += pad
            item(i, &out)
            out += i == count - 1 ? "\n" : ",\n"
        }
        out += String(repeating: "  ", count: level) + close
    }

    /// `12.5`, `3`, `0.125`: three decimals at most, in integer arithmetic (no locale, no exponent).
    public static func number(_ d: Double) -> String {
        guard d.isFinite else { return "0" }
        let thousandths = Int((d * 1000).rounded())
        let sign = thousandths < 0 ? "-" : ""
        let whole = abs(thousandths) / 1000
        var fraction = abs(thousandths) % 1000
        guard fraction != 0 else { return sign + String(whole) }
        var digits = 3
        while fraction % 10 == 0 {
            fraction /= 10
            digits -= 1
        }
        let text = String(fraction)
        return sign + String(whole) + "." + String(repeating: "0", count: digits - text.count) + text
    }

    /// RFC 8259 escaping: quote, backslash and control characters; everything else as UTF-8.
    public static func quote(_ s: String, into out: inout String) {
        out += "\""
        // Most strings need no escape: one pass over the UTF-8 bytes, then the string appended whole.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F }) {
            out += s
            out += "\""
            return
        }
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
