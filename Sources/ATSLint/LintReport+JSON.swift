extension LintReport {
    /// Machine-readable report: source, profile, notes, summary counts and the findings.
    public func json() -> String {
        JSONValue.object([
            ("tool", .string("atsproxy lint")),
            ("file", .string(artifactPath)),
            ("source", .string(sourceDescription)),
            ("ios", .number(profile.rawValue)),
            ("notes", .array(notes.map(JSONValue.string))),
            (
                "summary",
                .object([
                    ("error", .number(count(.error))), ("warning", .number(count(.warning))),
                    ("note", .number(count(.note))),
                ])
            ),
            (
                "findings",
                .array(
                    findings.map { f in
                        .object([
                            ("severity", .string(f.severity.rawValue)),
                            ("ruleID", .string(f.ruleID)),
                            ("keyPath", .array(f.keyPath.map(JSONValue.string))),
                            ("message", .string(f.message)),
                            ("fix", .string(f.fix)),
                        ])
                    })
            ),
        ]).rendered()
    }
}
