/// The character encodings a body rewrite decodes and encodes: those of nearly every text body on the web.
enum TextCharset: Equatable {
    case utf8, ascii, latin1

    var name: String {
        switch self {
        case .utf8: "UTF-8"
        case .ascii: "US-ASCII"
        case .latin1: "ISO-8859-1"
        }
    }

    /// Media types (besides `text/*`, `*+json` and `*+xml`) whose bodies are text.
    static let textTypes: Set<String> = [
        "application/json", "application/javascript", "application/x-javascript", "application/ecmascript",
        "application/xml", "application/x-www-form-urlencoded", "application/graphql", "application/x-ndjson",
        "application/manifest+json", "image/svg+xml",
    ]

    /// The charset to decode a body with, from its Content-Type; or why it is not text.
    static func of(contentType: String?, body: [UInt8]) -> Result<TextCharset, ActionNotice> {
        guard let contentType else {
            return String(validating: body, as: UTF8.self) != nil
                ? .success(.utf8)
                : .failure(ActionNotice(.notText, "modify body: no Content-Type and not UTF-8 text: left alone"))
        }
        let parts = contentType.split(separator: ";")
        let type = (parts.first.map { $0.trimmingSpaces } ?? "").lowercased()
        let isText =
            type.hasPrefix("text/") || type.hasSuffix("+json") || type.hasSuffix("+xml") || textTypes.contains(type)
        guard isText else {
            return .failure(ActionNotice(.notText, "modify body: \(type) is not text: left alone"))
        }
        var charset = "utf-8"
        for parameter in parts.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2, pair[0].trimmingSpaces.lowercased() == "charset" else { continue }
            charset = pair[1].trimmingSpaces.trimmingCharacters(in: "\"").lowercased()
        }
        switch charset {
        case "utf-8", "utf8": return .success(.utf8)
        case "us-ascii", "ascii": return .success(.ascii)
        case "iso-8859-1", "latin1", "iso_8859-1", "l1": return .success(.latin1)
        default:
            return .failure(ActionNotice(.notText, "modify body: charset \(charset) is not supported: left alone"))
        }
    }

    func decode(_ bytes: [UInt8]) -> String? {
        switch self {
        case .utf8: return String(validating: bytes, as: UTF8.self)
        case .ascii: return bytes.allSatisfy { $0 < 0x80 } ? String(decoding: bytes, as: UTF8.self) : nil
        case .latin1:
            var s = String.UnicodeScalarView()
            s.append(contentsOf: bytes.map { Unicode.Scalar($0) })
            return String(s)
        }
    }

    func encode(_ text: String) -> [UInt8]? {
        switch self {
        case .utf8: return Array(text.utf8)
        case .ascii: return text.utf8.allSatisfy { $0 < 0x80 } ? Array(text.utf8) : nil
        case .latin1:
            var out: [UInt8] = []
            for scalar in text.unicodeScalars {
                guard scalar.value < 256 else { return nil }
                out.append(UInt8(scalar.value))
            }
            return out
        }
    }
}

extension Substring {
    func trimmingCharacters(in set: String) -> Substring {
        var s = self
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return s
    }
}
