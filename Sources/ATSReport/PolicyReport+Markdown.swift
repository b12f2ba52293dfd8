import ATSPolicy
import Foundation

extension PolicyReport {
    /// The report as Markdown, for a pull-request comment.
    public func renderMarkdown() -> String {
        var out: [String] = []
        out.append("## ATS policy report")
        out.append("")
        out.append(headline)
        out.append("")
        out.append("**\(verdictLine)**")
        if !notes.isEmpty {
            out.append("")
            out += notes.map { "- \(md($0))" }
        }
        out.append("")
        out.append("### Hosts")
        out.append("")
        out.append("| Host | Verdict | Decided by | TLS | Exchanges |")
        out.append("|---|---|---|---|---|")
        for h in hosts {
            let tls = h.loads.compactMap(\.tls).first.map { t in
                [t.version, t.cipherSuite, t.keyExchange].compactMap { $0 }.joined(separator: " ")
            } ?? (h.loads.allSatisfy { $0.url.hasPrefix("http://") || $0.url.hasPrefix("ws://") } ? "cleartext" : "–")
            let verdict = h.verdict == .fails ? "❌ fails \(codes(h))" : h.verdict == .allowed ? "✅ ok" : "➖ not checked"
            out.append("| `\(md(h.host))` | \(verdict) | \(md(h.decidedBy)) | \(md(tls)) | \(h.exchanges) |")
        }
        out.append("")
        out.append("### Missing exceptions")
        out.append("")
        if missingExceptions.isEmpty { out.append("None: every judged load passes.") }
        for m in missingExceptions {
            out.append("- **`\(md(m.host))`** (\(plural(m.exchanges, "exchange"))): "
                + m.violations.map { md($0.explanation) }.joined(separator: "; "))
            if let fix = m.fix {
                out.append("  - Fix: \(md(fix.summary))")
            } else {
                out.append("  - No exception can help, fix the server: " + m.unfixable.map(md).joined(separator: "; "))
            }
        }
        out.append("")
        out.append("### Unused and over-broad exceptions")
        out.append("")
        if findings.isEmpty { out.append("None.") }
        for f in findings {
            out.append("- **\(f.kind.title)** `\(md(f.keyPathString))`: \(md(f.problem)) → \(md(f.advice))")
        }
        if let mirror {
            out.append("")
            out.append("### Device verdicts (`--ats mirror`)")
            out.append("")
            for line in mirror.summary.split(separator: "\n") {
                out.append("- " + md(line.trimmingCharacters(in: .whitespaces)))
            }
            for d in mirror.disagreements {
                out.append("- **Disagreement** `\(md(d.url))`: \(md(d.text))")
            }
        }
        out.append("")
        out.append("### Suggested `NSAppTransportSecurity`")
        out.append("")
        out.append("\(suggestionCheckText.prefix(1).uppercased() + suggestionCheckText.dropFirst()).")
        out.append("")
        out.append("```xml")
        out.append(suggestion.plistFragment())
        out.append("```")
        for u in suggestion.unfixable {
            out.append("")
            out.append("Left out, no exception can help: `\(md(u.url))`: \(u.reasons.map(md).joined(separator: "; "))")
        }
        return out.joined(separator: "\n") + "\n"
    }
}
