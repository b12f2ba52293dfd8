import Foundation
import ATSPolicy

extension SuggestedPolicy {
    /// The suggestion as a ready-to-paste XML fragment for the top level of an Info.plist
    /// (`<key>NSAppTransportSecurity</key><dict>…</dict>`), every key preceded by a comment naming the hosts that
    /// need it and why. `indent` levels of four spaces go before every line.
    public func plistFragment(indent: Int = 0) -> String {
        var lines: [String] = []
        if entries.isEmpty && pinnedDomains == nil {
            // With unfixable loads, "every observed load" would be false: those fail whatever the plist says.
            lines.append(comment(
                unfixable.isEmpty
                    ? "Apple's defaults let every observed load through: no ATS key is needed."
                    : "No ATS key is needed: Apple's defaults let through every observed load that a key could help."))
        }
        lines.append("<key>NSAppTransportSecurity</key>")
        if entries.isEmpty && pinnedDomains == nil {
            lines.append("<dict/>")
            return lines.map { pad(indent) + $0 }.joined(separator: "\n")
        }
        lines.append("<dict>")
        if !entries.isEmpty {
            lines.append("    <key>NSExceptionDomains</key>")
            lines.append("    <dict>")
            for entry in entries {
                lines.append("        <key>\(xmlEscaped(entry.domain))</key>")
                lines.append("        <dict>")
                for k in entry.keys {
                    let why = k.reasons.isEmpty ? "needed by \(entry.neededBy.joined(separator: ", "))" : k.reasons.joined(separator: "; ")
                    lines.append("            " + comment(why))
                    lines.append("            <key>\(xmlEscaped(k.key))</key>")
                    lines += k.value.xmlLines(indent: 3)
                }
                lines.append("        </dict>")
            }
            lines.append("    </dict>")
        }
        if let pinnedDomains {
            lines.append(
                "    " + comment("Kept from \(pinsSource ?? "the judged policy"): pins only tighten trust."))
            lines.append("    <key>NSPinnedDomains</key>")
            lines += pinnedDomains.xmlLines(indent: 1)
        }
        lines.append("</dict>")
        return lines.map { pad(indent) + $0 }.joined(separator: "\n")
    }

    /// A whole XML plist holding the fragment, which `atsproxy explain --plist`, `run --plist` and `report --plist`
    /// load as an Info.plist.
    public var plistDocument: String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <dict>
        \(plistFragment(indent: 1))
        </dict>
        </plist>

        """
    }

    private func pad(_ levels: Int) -> String { String(repeating: "    ", count: levels) }

    /// An XML comment; `--` may not appear inside one (host names such as `xn--…` have it), nor a trailing `-`.
    private func comment(_ text: String) -> String {
        var safe = text.replacingOccurrences(of: "--", with: "- -")
        while safe.contains("--") { safe = safe.replacingOccurrences(of: "--", with: "- -") }
        if safe.hasSuffix("-") { safe += " " }
        return "<!-- \(safe) -->"
    }
}
