extension ExceptionFix {
    /// The fix as a ready-to-paste XML plist fragment for the inside of `NSAppTransportSecurity`:
    /// `<key>NSExceptionDomains</key><dict><key>host</key><dict>…</dict></dict>`, indented four spaces per level.
    /// nil for `.noExceptionCanHelp`.
    public var plistSnippet: String? {
        guard case .setKeys(let domain, let keys) = self else { return nil }
        var entry = PlistDictionary()
        for k in keys { entry.set(k.key, k.value) }
        var lines = ["<key>NSExceptionDomains</key>", "<dict>", "    <key>\(xmlEscaped(domain))</key>"]
        lines += PlistValue.dictionary(entry).xmlLines(indent: 1)
        lines.append("</dict>")
        return lines.joined(separator: "\n")
    }

    /// The fix placed in an app's existing policy: where to paste, and what. Pasting a whole `NSExceptionDomains`
    /// into a policy that has one, or a second entry for a domain it lists, would make a duplicate key, which
    /// plist parsers reject or resolve silently. So: the whole dictionary when the app has no exception domains,
    /// the domain's entry when it has some but not this one, and only the keys when the entry exists.
    /// nil for `.noExceptionCanHelp`.
    public func placedSnippet(in policy: ATSPolicy?) -> (pasteInside: String, snippet: String)? {
        guard case .setKeys(let domain, let keys) = self, let whole = plistSnippet else { return nil }
        let appEntries = policy?.exceptionDomains.filter { $0.origin == .app } ?? []
        if appEntries.isEmpty { return ("NSAppTransportSecurity", whole) }
        var entry = PlistDictionary()
        for k in keys { entry.set(k.key, k.value) }
        let body = PlistValue.dictionary(entry).xmlLines(indent: 0)
        if appEntries.contains(where: { $0.key == domain }) {
            // The keys alone: the lines between the entry dictionary's <dict> and </dict>.
            let inner = body.dropFirst().dropLast().map { String($0.dropFirst(4)) }
            return ("NSAppTransportSecurity › NSExceptionDomains › \(domain) (replace these keys if present)",
                    inner.joined(separator: "\n"))
        }
        return ("NSAppTransportSecurity › NSExceptionDomains",
                (["<key>\(xmlEscaped(domain))</key>"] + body).joined(separator: "\n"))
    }

    /// One line for humans: `set on api.example.com: NSExceptionMinimumTLSVersion = TLSv1.0` or the reason
    /// nothing can help.
    public var summary: String {
        switch self {
        case .setKeys(let domain, let keys):
            "set in NSExceptionDomains › \(domain): "
                + keys.map { "\($0.key) = \($0.value.plistLiteral)" }.joined(separator: "; ")
        case .noExceptionCanHelp(let reason): "no Info.plist exception can help: \(reason)"
        }
    }
}

extension PlistValue {
    /// `YES`, `NO`, `TLSv1.0`: the value as Xcode's plist editor shows it.
    public var plistLiteral: String {
        switch self {
        case .bool(let b): b ? "YES" : "NO"
        case .integer(let i): String(i)
        case .real(let d): String(d)
        case .string(let s): s
        case .date(let t): "date(\(t))"
        case .data(let bytes): "<\(bytes.count) bytes>"
        case .array(let a): "(" + a.map(\.plistLiteral).joined(separator: ", ") + ")"
        case .dictionary(let d):
            "{" + d.entries.map { "\($0.key) = \($0.value.plistLiteral)" }.joined(separator: "; ") + "}"
        }
    }

    /// XML plist lines for this value at `indent` levels of four spaces (public: `atsproxy report` writes its
    /// suggested policy with them).
    public func xmlLines(indent: Int) -> [String] {
        let pad = String(repeating: "    ", count: indent)
        switch self {
        case .bool(let b): return [pad + (b ? "<true/>" : "<false/>")]
        case .integer(let i): return [pad + "<integer>\(i)</integer>"]
        case .real(let d): return [pad + "<real>\(d)</real>"]
        case .string(let s): return [pad + "<string>\(xmlEscaped(s))</string>"]
        case .date(let t): return [pad + "<real>\(t)</real>"]
        case .data(let bytes): return [pad + "<data>\(base64(bytes))</data>"]
        case .array(let items):
            return [pad + "<array>"] + items.flatMap { $0.xmlLines(indent: indent + 1) } + [pad + "</array>"]
        case .dictionary(let d):
            var lines = [pad + "<dict>"]
            for (key, value) in d {
                lines.append(pad + "    <key>\(xmlEscaped(key))</key>")
                lines += value.xmlLines(indent: indent + 1)
            }
            lines.append(pad + "</dict>")
            return lines
        }
    }
}

/// `s` with `&`, `<` and `>` escaped for XML text (plist keys and strings).
public func xmlEscaped(_ s: String) -> String {
    var out = ""
    for c in s {
        switch c {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        default: out.append(c)
        }
    }
    return out
}

private func base64(_ bytes: [UInt8]) -> String {
    let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    var out = ""
    var i = 0
    while i < bytes.count {
        let b0 = Int(bytes[i]), b1 = i + 1 < bytes.count ? Int(bytes[i + 1]) : 0
        let b2 = i + 2 < bytes.count ? Int(bytes[i + 2]) : 0
        out.append(table[b0 >> 2])
        out.append(table[((b0 & 3) << 4) | (b1 >> 4)])
        out.append(i + 1 < bytes.count ? table[((b1 & 15) << 2) | (b2 >> 6)] : "=")
        out.append(i + 2 < bytes.count ? table[b2 & 63] : "=")
        i += 3
    }
    return out
}
