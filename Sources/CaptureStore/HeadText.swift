import HTTP1Core

/// Heads stored as HTTP/1 text: the request or status line, then one `Name: value` line per field in wire order,
/// CRLF-separated, with no blank line at the end. Compact, readable in `sqlite3`, and built without an encoder on
/// the writer thread. An HTTP/2 head is stored the same way, with its version as the relay recorded it.
enum HeadText {
    static func request(_ head: HTTPRequestHead) -> String {
        var bytes: [UInt8] = []
        appendRequest(head, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    static func response(_ head: HTTPResponseHead) -> String {
        var bytes: [UInt8] = []
        appendResponse(head, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `request(_:)` appended as UTF-8 to `out` (the writer binds the bytes: no String is made).
    static func appendRequest(_ head: HTTPRequestHead, to out: inout [UInt8]) {
        appendUTF8(head.method, to: &out)
        out.append(UInt8(ascii: " "))
        appendUTF8(head.target, to: &out)
        out.append(UInt8(ascii: " "))
        appendVersion(head.version, to: &out)
        head.headers.appendLines(to: &out)
    }

    /// `response(_:)` appended as UTF-8 to `out`.
    static func appendResponse(_ head: HTTPResponseHead, to out: inout [UInt8]) {
        appendVersion(head.version, to: &out)
        out.append(UInt8(ascii: " "))
        appendDecimal(head.status, to: &out)
        if !head.reason.isEmpty {
            out.append(UInt8(ascii: " "))
            appendUTF8(head.reason, to: &out)
        }
        head.headers.appendLines(to: &out)
    }

    /// `out.append(contentsOf: text.utf8)` through the string's contiguous bytes: one copy, where the generic
    /// sequence append cost about 170 instructions per call, several per exchange a capture stores.
    @inline(__always)
    private static func appendUTF8(_ text: String, to out: inout [UInt8]) {
        var text = text
        text.withUTF8 { out.append(contentsOf: $0) }
    }

    /// Nearly every head's version, as one copy.
    private static let http11 = Array("HTTP/1.1".utf8)

    private static func appendVersion(_ version: HTTPVersion, to out: inout [UInt8]) {
        if version.major == 1, version.minor == 1 { return out.append(contentsOf: http11) }
        // "HTTP/" a byte at a time: appending the literal's UTF-8 view went through the generic sequence path.
        out.append(UInt8(ascii: "H"))
        out.append(UInt8(ascii: "T"))
        out.append(UInt8(ascii: "T"))
        out.append(UInt8(ascii: "P"))
        out.append(UInt8(ascii: "/"))
        appendDecimal(version.major, to: &out)
        out.append(UInt8(ascii: "."))
        appendDecimal(version.minor, to: &out)
    }

    static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        // Versions and statuses: one to three digits, written without making a String.
        guard value >= 0, value < 1000 else { return out.append(contentsOf: String(value).utf8) }
        if value >= 100 { out.append(UInt8(ascii: "0") + UInt8(value / 100)) }
        if value >= 10 { out.append(UInt8(ascii: "0") + UInt8(value / 10 % 10)) }
        out.append(UInt8(ascii: "0") + UInt8(value % 10))
    }

    /// The request head stored by `request(_:)`; nil when the text is not one.
    static func parseRequest(_ text: String) -> HTTPRequestHead? {
        // CRLF is one Character in Swift: splitting on it is a plain scan, cheaper than Foundation's components.
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let parts = lines[0].split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let version = parseVersion(parts[2]) else { return nil }
        guard let fields = parseFields(lines.dropFirst()) else { return nil }
        return HTTPRequestHead(method: String(parts[0]), target: String(parts[1]), version: version, headers: fields)
    }

    /// The response head stored by `response(_:)`; nil when the text is not one.
    static func parseResponse(_ text: String) -> HTTPResponseHead? {
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let parts = lines[0].split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, let version = parseVersion(parts[0]), let status = Int(parts[1]) else { return nil }
        guard let fields = parseFields(lines.dropFirst()) else { return nil }
        return HTTPResponseHead(
            version: version, status: status, reason: parts.count == 3 ? String(parts[2]) : "", headers: fields)
    }

    private static func parseVersion(_ text: Substring) -> HTTPVersion? {
        guard text.hasPrefix("HTTP/") else { return nil }
        let digits = text.dropFirst(5).split(separator: ".")
        guard digits.count == 2, let major = Int(digits[0]), let minor = Int(digits[1]) else { return nil }
        return HTTPVersion(major: major, minor: minor)
    }

    private static func parseFields(_ lines: ArraySlice<String>) -> HTTPHeaders? {
        var fields: [(String, String)] = []
        fields.reserveCapacity(lines.count)
        for line in lines {
            // The first ": " (a name has no colon), found on the UTF-8 bytes rather than through Foundation.
            let utf8 = line.utf8
            var i = utf8.startIndex
            var found: String.Index?
            while i < utf8.endIndex {
                let next = utf8.index(after: i)
                if utf8[i] == UInt8(ascii: ":"), next < utf8.endIndex, utf8[next] == UInt8(ascii: " ") {
                    found = i
                    break
                }
                i = next
            }
            guard let colon = found else { return nil }
            fields.append((String(line[..<colon]), String(line[utf8.index(colon, offsetBy: 2)...])))
        }
        return HTTPHeaders(fields)
    }
}

/// JSON text for the few shapes the writer stores per record (arrays of strings and of pairs), escaped by hand:
/// `JSONEncoder` would cost more than the rest of a record's write.
enum JSONText {
    static func pairs(_ pairs: some Sequence<(String, String)>) -> String {
        var out = "["
        var first = true
        for (key, value) in pairs {
            if !first { out += "," }
            first = false
            out += "["
            appendString(key, to: &out)
            out += ","
            appendString(value, to: &out)
            out += "]"
        }
        out += "]"
        return out
    }

    static func strings(_ strings: [String]) -> String {
        var out = "["
        for (i, s) in strings.enumerated() {
            if i > 0 { out += "," }
            appendString(s, to: &out)
        }
        out += "]"
        return out
    }

    static func appendString(_ s: String, to out: inout String) {
        out += "\""
        // Most strings need no escape: one pass over the UTF-8 bytes, then the string appended whole.
        if !s.utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out += s
            out += "\""
            return
        }
        var plainStart = s.unicodeScalars.startIndex
        var i = plainStart
        let scalars = s.unicodeScalars
        while i < scalars.endIndex {
            let c = scalars[i]
            let escape: String? =
                switch c {
                case "\"": "\\\""
                case "\\": "\\\\"
                case "\n": "\\n"
                case "\r": "\\r"
                case "\t": "\\t"
                default: c.value < 0x20 ? "\\u" + hex4(c.value) : nil
                }
            if let escape {
                out.unicodeScalars.append(contentsOf: scalars[plainStart..<i])
                out += escape
                plainStart = scalars.index(after: i)
            }
            i = scalars.index(after: i)
        }
        out.unicodeScalars.append(contentsOf: scalars[plainStart..<scalars.endIndex])
        out += "\""
    }

    private static func hex4(_ v: UInt32) -> String {
        let digits = String(v, radix: 16)
        return String(repeating: "0", count: 4 - digits.count) + digits
    }
}
