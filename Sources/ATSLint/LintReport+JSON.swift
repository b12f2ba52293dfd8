import OrderedJSON
extension LintReport {
    /// Machine-readable report: source, profile, notes, summary counts and the findings.
    public func json() -> String {
        JSONValue.fields([
            ("tool", .string("atsproxy lint")),
            ("file", .string(artifactPath)),
            ("source", .string(sourceDescription)),
            ("ios", .int(profile.rawValue)),
            ("notes", .array(notes.map(JSONValue.string))),
            (
                "summary",
                .fields([
                    ("error", .int(count(.error))), ("warning", .int(count(.warning))),
                    ("note", .int(count(.note))),
                ])
            ),
            (
                "findings",
                .array(
                    findings.map { f in
                        .fields([
                            ("severity", .string(f.severity.rawValue)),
                            ("ruleID", .string(f.ruleID)),
                            ("keyPath", .array(f.keyPath.map(JSONValue.string))),
                            ("message", .string(f.message)),
                            ("fix", .string(f.fix)),
                        ])
                    })
            ),
        ]).rendered() + "\n"
    }
}
