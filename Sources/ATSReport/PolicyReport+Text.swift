import ATSPolicy
import Foundation

extension PolicyReport {
    /// The report for a terminal: sections for hosts, missing exceptions, unused and over-broad exceptions and the
    /// suggested policy. ANSI colour only when `colour` is set (the CLI sets it when stdout is a terminal).
    public func renderText(colour: Bool = false) -> String {
        let paint = Paint(enabled: colour)
        var out: [String] = []
        out.append(paint.bold(headline))
        out += notes.map { "  \($0)" }
        if !policyDiagnostics.isEmpty {
            out.append("")
            out.append(paint.bold("Policy findings (\(policyDiagnostics.count)):"))
            for d in policyDiagnostics { out.append("  \(d.severity): \(d.keyPathString): \(d.problem)") }
        }

        out.append("")
        out.append(paint.bold("Hosts (\(hosts.count)):"))
        for h in hosts {
            out.append(
                "  \(h.host)  \(paint.verdict(h.verdict, codes: codes(h)))  \(plural(h.exchanges, "exchange"))  "
                    + "decided by: \(h.decidedBy)")
            for load in h.loads {
                out.append("    \(load.url)  \(paint.verdict(load.verdict, codes: ""))  \(plural(load.exchanges, "exchange"))")
                if let tls = load.tls { out += tlsLines(tls).map { "      " + $0 } }
                for v in load.violations { out.append("      \(paint.red("✗")) \(v.explanation)") }
                if let note = load.note { out.append("      note: \(note)") }
            }
        }

        out.append("")
        out.append(paint.bold("Missing exceptions (\(missingExceptions.count)):"))
        if missingExceptions.isEmpty { out.append("  none: every judged load passes") }
        for m in missingExceptions {
            out.append("  \(m.host) (\(plural(m.exchanges, "exchange")): \(m.urls.joined(separator: ", ")))")
            for v in m.violations {
                out.append("    \(v.urlError.code)\(v.sslError.map { "/\($0.code)" } ?? ""): \(v.explanation)")
            }
            if let fix = m.fix {
                out.append("    Fix: \(fix.summary)")
                if let snippet = m.fixPlist {
                    out.append("    Paste inside \(m.fixPasteInside ?? "NSAppTransportSecurity"):")
                    out += snippet.split(separator: "\n").map { "      " + $0 }
                }
            } else {
                out.append("    \(paint.red("No exception can help: fix the server."))")
                out += m.unfixable.map { "      - \($0)" }
            }
        }

        out.append("")
        out.append(paint.bold("Unused and over-broad exceptions (\(findings.count)):"))
        if findings.isEmpty { out.append("  none") }
        for f in findings {
            out.append("  \(paint.yellow(f.kind.title)): \(f.keyPathString)")
            out.append("    \(f.problem)")
            out.append("    → \(f.advice)")
        }

        if let mirror {
            out.append("")
            let lines = mirror.summary.split(separator: "\n").map(String.init)
            out.append(paint.bold("Device verdicts (--ats mirror)") + ": " + (lines.first ?? ""))
            out += lines.dropFirst()
            for d in mirror.disagreements {
                out.append("  \(paint.red("DISAGREEMENT")) \(d.url): \(d.text)")
            }
        }

        out.append("")
        out.append(paint.bold("Suggested NSAppTransportSecurity") + " (\(suggestionCheckText)):")
        out += suggestion.plistFragment(indent: 1).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for u in suggestion.unfixable {
            out.append("  Left out, no exception can help: \(u.url): \(u.reasons.joined(separator: "; "))")
        }

        out.append("")
        out.append(paint.bold(verdictLine))
        return out.joined(separator: "\n") + "\n"
    }

    // MARK: Shared by the renderers (text, Markdown, JSON)

    var headline: String {
        "ATS policy from \(policySource) against \(plural(exchangeCount, "observed exchange")) to "
            + "\(plural(hosts.count, "host")), simulated on \(profile)"
    }

    /// The bottom line the exit status follows.
    public var verdictLine: String {
        let failing = hosts.filter { $0.verdict == .fails }.count
        guard failing > 0 else {
            return findings.isEmpty
                ? "The policy fits: every observed load passes."
                : "The policy lets every observed load through, with \(plural(findings.count, "unused or over-broad exception"))."
        }
        let fixable = missingExceptions.filter { $0.fix != nil }.count
        return "Loads would fail: \(plural(failing, "host")) (\(fixable) fixable with an exception, "
            + "\(missingExceptions.count - fixable) needing a server fix)."
    }

    var suggestionCheckText: String {
        guard suggestion.verified else {
            return "CHECK FAILED: " + suggestion.checks.filter { $0.verdict == .fails || $0.explainVerdict == "blocked" }
                .map(\.url).joined(separator: ", ") + " still fail with it"
        }
        switch suggestion.checks.count {
        case 0: return "nothing to check: no observed load is one an exception can let through"
        case 1: return "checked: the 1 load an exception can let through passes with it, and explain does not refuse it"
        case let n: return "checked: the \(n) loads an exception can let through all pass with it, and explain refuses none"
        }
    }

    func codes(_ h: HostReport) -> String {
        var seen: [String] = []
        for load in h.loads {
            guard let v = load.violations.first else { continue }
            let code = "\(v.urlError.code)" + (v.sslError.map { "/\($0.code)" } ?? "")
            if !seen.contains(code) { seen.append(code) }
        }
        return seen.joined(separator: ",")
    }

    private func tlsLines(_ t: TLSSummary) -> [String] {
        var first = [t.version, t.cipherSuite, t.keyExchange, t.alpn.map { "ALPN \($0)" }].compactMap { $0 }
            .joined(separator: " ")
        if first.isEmpty { first = "no TLS negotiated" }
        var lines = ["TLS: \(first); \(t.trust)" + (t.hostnameMatches ? "" : "; name does not match")]
        if let failure = t.failure { lines.append("app-like handshake at capture time: \(failure)") }
        lines += t.chain.enumerated().map { i, c in (i == 0 ? "leaf: " : "ca \(i): ") + c }
        return lines
    }

    func plural(_ n: Int, _ word: String) -> String { "\(n) \(word)\(n == 1 ? "" : "s")" }

    func md(_ text: String) -> String { text.replacingOccurrences(of: "|", with: "\\|") }
}

extension PolicyFinding.Kind {
    /// A few words for headings.
    public var title: String {
        switch self {
        case .unusedEntry: "unused entry"
        case .subdomainsOnlyApex: "NSIncludesSubdomains matched only the apex"
        case .subdomainsOfPublicSuffix: "NSIncludesSubdomains on a public suffix"
        case .arbitraryLoadsTooBroad: "NSAllowsArbitraryLoads broader than needed"
        case .minimumTLSTooLow: "minimum TLS version lower than needed"
        case .insecureHTTPOnlyHTTPS: "insecure HTTP allowed but only HTTPS seen"
        }
    }
}

/// ANSI styling, or none.
private struct Paint {
    let enabled: Bool
    func wrap(_ code: String, _ s: String) -> String { enabled ? "\u{1B}[\(code)m\(s)\u{1B}[0m" : s }
    func bold(_ s: String) -> String { wrap("1", s) }
    func red(_ s: String) -> String { wrap("31", s) }
    func yellow(_ s: String) -> String { wrap("33", s) }
    func verdict(_ v: LoadVerdict, codes: String) -> String {
        switch v {
        case .allowed: wrap("32", "ok")
        case .fails: wrap("31", codes.isEmpty ? "FAILS" : "FAILS \(codes)")
        case .notChecked: wrap("2", "not checked")
        }
    }
}
