import FoundationEssentials

/// What `atsproxy explain` says about a policy and a list of URLs: per URL the pre-connect verdict (refused with
/// -1022, or the requirements the connection will be held to), the deciding entry and why, the offered suites,
/// and the notes on unconfirmed readings. Pure: build it, then render as text or JSON.
public struct ExplainReport: Sendable, Codable {
    /// One URL's answer.
    public struct Item: Sendable, Codable {
        /// The URL as given.
        public var url: String
        /// `blocked` (refused with -1022), `full-ats` (no key relaxes ATS), `exception` (an exception entry
        /// governs), `no-ats` (ATS off for the host: default trust only), or `invalid` (the URL could not be read).
        public var verdict: String
        /// The entry or key that decided, and why.
        public var decision: PolicyDecision?
        /// The -1022 refusal, for a blocked URL.
        public var violation: ATSViolation?
        /// What the connection is held to, for a URL that may proceed.
        public var requirements: ConnectionRequirements?
        /// The violation's fix as an XML plist snippet, when there is one, shaped for this policy
        /// (`ExceptionFix.placedSnippet(in:)`).
        public var fixPlist: String?
        /// Where `fixPlist` goes, e.g. `NSAppTransportSecurity › NSExceptionDomains`.
        public var fixPasteInside: String?
        /// Why the URL could not be evaluated.
        public var error: String?
    }

    /// The simulated OS release.
    public var profile: IOSProfile
    /// Where the policy came from (a file path), for the heading.
    public var source: String
    /// How the source was read (e.g. "whole Info.plist without NSAppTransportSecurity: full ATS defaults").
    public var sourceNotes: [String]
    /// One answer per URL, in the order given.
    public var items: [Item]
    /// What the decoder found in the policy.
    public var diagnostics: [PolicyDiagnostic]

    /// Evaluates every URL against `policy` before any connection.
    public init(policy: ATSPolicy, urls: [String], source: String, sourceNotes: [String] = []) {
        profile = policy.profile
        self.source = source
        self.sourceNotes = sourceNotes
        diagnostics = policy.diagnostics
        items = urls.map { url in
            let target: ConnectionTarget
            do throws(URLTargetError) { target = try ConnectionTarget(parsing: url) } catch {
                return Item(url: url, verdict: "invalid", error: error.problem)
            }
            switch policy.requirements(for: target) {
            case .blocked(let v):
                let placed = v.fix.placedSnippet(in: policy)
                return Item(
                    url: url, verdict: "blocked", decision: v.decidedBy, violation: v, fixPlist: placed?.snippet,
                    fixPasteInside: placed?.pasteInside)
            case .proceed(let r):
                let verdict =
                    policy.exceptionMatch(for: target.host) != nil ? "exception" : r.atsEnforced ? "full-ats" : "no-ats"
                return Item(url: url, verdict: verdict, decision: r.decidedBy, requirements: r)
            }
        }
    }

    /// True when some URL is refused before connecting (or could not be read).
    public var anyBlocked: Bool { items.contains { $0.verdict == "blocked" } }
    public var anyInvalid: Bool { items.contains { $0.verdict == "invalid" } }

    /// Pretty, key-sorted JSON.
    public func renderJSON() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// Human-readable text, one block per URL.
    public func renderText() -> String {
        var out = ["ATS policy from \(source), simulated on \(profile)"]
        out += sourceNotes.map { "  \($0)" }
        // Most severe first; within a severity, file order.
        let shown = diagnostics.enumerated().sorted { a, b in
            a.element.severity != b.element.severity ? a.element.severity > b.element.severity : a.offset < b.offset
        }.map(\.element)
        if !shown.isEmpty {
            out.append("")
            out.append("Policy findings (\(shown.count)):")
            for d in shown { out.append("  \(d.severity): \(d.keyPathString): \(d.problem)") }
        }
        for item in items {
            out.append("")
            out.append(item.url)
            if let error = item.error {
                out.append("  Error: \(error)")
                continue
            }
            if let v = item.violation {
                out.append("  Verdict: BLOCKED before connecting — \(v.urlError.code) \(v.urlError.name)")
                out.append("  Error text: \(v.urlError.localizedDescription)")
            } else if let r = item.requirements {
                out.append("  Verdict: " + verdictText(item.verdict, r))
            }
            if let d = item.decision {
                out.append("  Decided by: " + (d.keyPath.isEmpty ? "ATS defaults (no key applies)" : d.keyPathString))
                out.append("  Why: \(d.reason)")
            }
            if let v = item.violation {
                out.append("  Fix: \(v.fix.summary)")
                if let snippet = item.fixPlist {
                    out.append("  Paste inside \(item.fixPasteInside ?? "NSAppTransportSecurity"):")
                    out += snippet.split(separator: "\n").map { "    " + $0 }
                }
            }
            if let r = item.requirements { out += requirementLines(r) }
            for note in item.decision?.notes ?? [] { out.append("  Note: \(note)") }
        }
        return out.joined(separator: "\n") + "\n"
    }

    private func verdictText(_ verdict: String, _ r: ConnectionRequirements) -> String {
        if !r.target.isSecure {
            return "allowed over cleartext (\(r.target.scheme)://)"
        }
        switch verdict {
        case "no-ats": return "may connect; ATS does not apply to this host (default trust evaluation only)"
        case "exception": return "may connect under the exception entry's rules"
        default: return "may connect under full ATS"
        }
    }

    private func requirementLines(_ r: ConnectionRequirements) -> [String] {
        guard r.target.isSecure else { return [] }
        var lines: [String] = []
        lines.append(
            "  TLS: minimum \(r.minimumTLSVersion.plistName); offers "
                + (r.offeredVersions.isEmpty ? "nothing" : r.offeredVersions.map(\.plistName).joined(separator: ", ")))
        lines.append("  Forward secrecy: " + (r.requiresForwardSecrecy ? "required (ECDHE)" : "not required"))
        lines.append(
            "  ATS certificate minimums: " + (r.atsEnforced ? "enforced" : "not enforced (default trust only)"))
        if let suites = r.offeredCipherSuites {
            lines.append("  Cipher suites offered (\(suites.count), in order):")
            lines += suites.map { "    \($0.hexCode) \($0.ianaName)" }
        } else {
            lines.append("  Cipher suites offered: the system's default list (ATS sets none for this host)")
        }
        let c = r.certificateRules
        var rules: [String] = []
        if c.minimumRSABits > 0 { rules.append("RSA ≥ \(c.minimumRSABits) bits, EC ≥ \(c.minimumECBits) bits") }
        if c.requiresSHA2 { rules.append("SHA-2 signatures") }
        if c.requiresSANMatch { rules.append("host named in subjectAltName") } else { rules.append("host name match") }
        if c.requiresServerAuthEKU { rules.append("serverAuth EKU") }
        if c.enforcesValidityLimits {
            rules.append(
                "≤ \(c.maximumValidityDaysSystemRoot) days (system roots) / "
                    + "≤ \(c.maximumValidityDaysUserRoot) days (user roots)"
            )
        }
        if c.requiresCertificateTransparency { rules.append("≥ 2 SCTs") }
        lines.append("  Certificates: trusted chain, " + rules.joined(separator: ", "))
        if let pins = r.pins {
            lines.append(
                "  Pins: NSPinnedDomains › \(pins.domain) (\(pins.leafSPKISHA256.count) leaf, "
                    + "\(pins.caSPKISHA256.count) CA SPKI-SHA256)")
        }
        return lines
    }
}
