import ATSPolicy

/// The `X-ATS-*` headers and the `--block http` answer for one ATS verdict.
///
/// `X-ATS-Error` and `X-ATS-SSL-Error` carry the error of the *first* violation: the one the app's task would
/// complete with. Every violation is listed in the body. Header values stay ASCII (`/` separates key-path parts).
public struct ATSAnswer: Sendable, Equatable {
    public var url: String
    public var decision: PolicyDecision
    public var violations: [ATSViolation]
    /// Set when `--block tls` served a leaf with the upstream's flaw and the client accepted it anyway (its TLS
    /// library does not check that flaw): the flaw, e.g. "valid for 900 days". The body then says why the client
    /// gets an HTTP answer rather than the failed handshake the app gets.
    public var acceptedFlaw: String?

    public init(url: String, decision: PolicyDecision, violations: [ATSViolation]) {
        self.url = url
        self.decision = decision
        self.violations = violations
    }

    /// The plist entry (and key, when one violation names it) that decided, e.g.
    /// `NSAppTransportSecurity/NSExceptionDomains/old.test/NSExceptionMinimumTLSVersion`.
    public var ruleHeaderValue: String {
        let path = decision.keyPath.isEmpty ? ["NSAppTransportSecurity (defaults)"] : decision.keyPath
        return path.map(Self.ascii).joined(separator: "/")
    }

    /// Headers for an annotated (or blocked) response.
    public var headers: [(String, String)] {
        var h: [(String, String)] = [("X-ATS-Verdict", verdict)]
        h.append(("X-ATS-Rule", ruleHeaderValue))
        if let first = violations.first {
            h.append(("X-ATS-Error", "\(first.urlError.code) \(first.urlError.name)"))
            if let ssl = first.sslError { h.append(("X-ATS-SSL-Error", "\(ssl.code) \(ssl.name)")) }
            for v in violations { h.append(("X-ATS-Violation", Self.ascii("\(v.kind.rawValue): \(v.explanation)"))) }
        }
        return h
    }

    /// `allowed`, `violation`, or `unreachable` when the upstream could not be reached or never answered (no ATS
    /// verdict was made).
    public var verdict: String {
        if violations.isEmpty { return "allowed" }
        return violations.allSatisfy { $0.kind == .unreachable || $0.kind == .timedOut } ? "unreachable" : "violation"
    }

    /// 403 for a cleartext (-1022) block, 502 for everything else (the upstream connection is what failed).
    public var blockStatus: Int {
        violations.first?.urlError == .requiresSecureConnection ? 403 : 502
    }

    /// The plain-text body of a block answer: what is wrong, the app's error, and the narrowest fix.
    public var blockBody: String {
        let headline =
            if verdict == "unreachable" {
                "ATSProxy could not reach the server: the app would fail the same way. This is not an ATS verdict."
            } else if blockStatus == 403 {
                "ATSProxy refused this request without connecting to the server, as the app refuses the load before "
                    + "connecting: its App Transport Security policy requires a secure connection to this host."
            } else {
                "ATSProxy blocked this request: the app's App Transport Security policy refuses it."
            }
        var lines = [headline, ""]
        lines.append("URL:  \(url)")
        lines.append("Rule: \(decision.keyPath.isEmpty ? "ATS defaults (no entry matched)" : decision.keyPathString)")
        lines.append("Why the rule applies: \(decision.reason)")
        for (i, v) in violations.enumerated() {
            lines.append("")
            lines.append("Violation \(i + 1): \(v.explanation)")
            lines.append("  The app would get: \(NSErrorDescription(violation: v, failingURL: url).description)")
            switch v.fix {
            case .setKeys(let domain, let keys):
                let keyText = keys.map { "\($0.key) = \(Self.plistText($0.value))" }.joined(separator: ", ")
                lines.append("  Narrowest fix: in NSExceptionDomains › \(domain), set \(keyText)")
            case .noExceptionCanHelp(let reason):
                lines.append("  No Info.plist exception can allow this: \(reason)")
            }
        }
        // The rule's notes are about the simulation, not this failure: said so, and left out where no ATS verdict
        // was made (a server that could not be reached).
        if verdict != "unreachable", !decision.notes.isEmpty {
            lines.append("")
            lines.append(
                "How ATSProxy reads Apple's behaviour where it is unconfirmed (for every connection under this rule):")
            for note in decision.notes { lines.append("  Note: \(note)") }
        }
        if let acceptedFlaw {
            lines.append("")
            lines.append(
                "Why an HTTP answer rather than a failed TLS handshake (--block tls): this client accepted the proxy's "
                    + "certificate although it carries the server's flaw (\(acceptedFlaw)), because its TLS library "
                    + "does not check that, or its checks are off. The app's TLS stack checks it: the app fails in the "
                    + "handshake.")
        }
        return lines.joined(separator: "\n") + "\n"
    }

    static func plistText(_ v: PlistValue) -> String {
        switch v {
        case .bool(let b): b ? "YES" : "NO"
        case .string(let s): s
        case .integer(let i): String(i)
        default: v.typeName
        }
    }

    /// Replaces anything outside printable ASCII so a header value can never break the framing.
    static func ascii(_ s: String) -> String {
        String(s.unicodeScalars.map { (0x20...0x7e).contains($0.value) ? Character($0) : "?" })
    }
}
