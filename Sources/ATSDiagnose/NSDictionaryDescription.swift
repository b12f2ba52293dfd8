import ATSPolicy

/// Renders a plist dictionary the way `-[NSDictionary description]` prints it, as nscurl's `ATS Dictionary:`
/// block shows it: four-space indents, `key = value;`, nested dictionaries opened after `=` plus the indent,
/// booleans as `true`/`false` (recent macOS; reference §5.1), strings quoted unless purely alphanumeric.
enum NSDictionaryDescription {
    static func render(_ dictionary: PlistDictionary) -> String {
        lines(dictionary, level: 0).joined(separator: "\n")
    }

    private static func lines(_ d: PlistDictionary, level: Int) -> [String] {
        let pad = String(repeating: "    ", count: level + 1)
        var out = ["{"]
        for (key, value) in d {
            let k = quoted(key)
            switch value {
            case .dictionary(let inner):
                var nested = lines(inner, level: level + 1)
                nested[0] = "\(pad)\(k) = \(pad){"
                nested[nested.count - 1] += ";"
                out += nested
            default:
                out.append("\(pad)\(k) = \(scalar(value));")
            }
        }
        out.append(String(repeating: "    ", count: level) + "}")
        return out
    }

    private static func scalar(_ v: PlistValue) -> String {
        switch v {
        case .bool(let b): b ? "true" : "false"
        case .integer(let i): String(i)
        case .real(let r): String(r)
        case .string(let s): quoted(s)
        default: quoted(v.plistLiteral)
        }
    }

    private static func quoted(_ s: String) -> String {
        let plain = !s.isEmpty && s.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
        return plain ? s : "\"" + s.replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }
}
