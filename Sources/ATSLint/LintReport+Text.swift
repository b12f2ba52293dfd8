extension LintReport {
    /// Human-readable report: a header, then per finding `severity[RULE] key/path`, the message and the fix.
    public func text() -> String {
        var out = "\(sourceDescription) (\(profile)): \(summary)\n"
        for note in notes { out += "  note: \(note)\n" }
        for f in findings {
            out += "\n\(f.severity.rawValue)[\(f.ruleID)] \(f.keyPathString)\n"
            out += "  \(f.message)\n"
            out += "  fix: \(f.fix)\n"
        }
        return out
    }
}

extension LintFinding {
    /// `severity[RULE] key/path: message`, one line without the fix (`atsproxy run`'s startup warnings).
    public var oneLine: String { "\(severity.rawValue)[\(ruleID)] \(keyPathString): \(message)" }
}
