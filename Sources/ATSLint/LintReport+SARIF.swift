import OrderedJSON
extension LintReport {
    /// SARIF 2.1.0 (OASIS) for code-scanning tools: one run, the full rule catalogue in `tool.driver.rules`, one
    /// result per finding located by the plist path and a logical location named by the key path.
    public func sarif(toolVersion: String = "0.1.0") -> String {
        let rules = LintRule.allCases
        let ruleIndex = Dictionary(uniqueKeysWithValues: rules.enumerated().map { ($1.rawValue, $0) })
        let uri = Self.uriReference(artifactPath)
        let driverRules: [JSONValue] = rules.map { rule in
            var members: [(String, JSONValue)] = [
                ("id", .string(rule.rawValue)),
                ("name", .string(rule.name)),
                ("shortDescription", .fields([("text", .string(rule.shortDescription))])),
            ]
            if let help = rule.helpURI { members.append(("helpUri", .string(help))) }
            members.append(("defaultConfiguration", .fields([("level", .string(rule.defaultSeverity.rawValue))])))
            return .fields(members)
        }
        let results: [JSONValue] = findings.map { f in
            var result: [(String, JSONValue)] = [("ruleId", .string(f.ruleID))]
            if let i = ruleIndex[f.ruleID] { result.append(("ruleIndex", .int(i))) }
            result += [
                ("level", .string(f.severity.rawValue)),
                ("message", .fields([("text", .string("\(Self.sentence(f.message)) Fix: \(Self.sentence(f.fix))"))])),
                (
                    "locations",
                    .array([
                        .fields([
                            ("physicalLocation", .fields(physicalLocation(uri: uri, finding: f))),
                            (
                                "logicalLocations",
                                .array([
                                    .fields([
                                        ("fullyQualifiedName", .string(f.keyPathString)),
                                        ("kind", .string("member")),
                                    ])
                                ])
                            ),
                        ])
                    ])
                ),
                (
                    "properties",
                    .fields([("fix", .string(f.fix)), ("keyPath", .array(f.keyPath.map(JSONValue.string)))])
                ),
            ]
            return .fields(result)
        }
        return JSONValue.fields([
            ("$schema", .string("https://json.schemastore.org/sarif-2.1.0.json")),
            ("version", .string("2.1.0")),
            (
                "runs",
                .array([
                    .fields([
                        (
                            "tool",
                            .fields([
                                (
                                    "driver",
                                    .fields([
                                        ("name", .string("atsproxy lint")),
                                        ("version", .string(toolVersion)),
                                        ("rules", .array(driverRules)),
                                    ])
                                )
                            ])
                        ),
                        ("artifacts", .array([.fields([("location", .fields([("uri", .string(uri))]))])])),
                        ("results", .array(results)),
                    ])
                ])
            ),
        ]).rendered() + "\n"
    }

    /// The artifact and, when the key was found in the file, the region of its `<key>` (so that code-scanning
    /// annotations land on that line, not on the whole file).
    private func physicalLocation(uri: String, finding: LintFinding) -> [(String, JSONValue)] {
        var members: [(String, JSONValue)] = [("artifactLocation", .fields([("uri", .string(uri))]))]
        if let region = region(of: finding) {
            members.append(
                ("region", .fields([("startLine", .int(region.line)), ("startColumn", .int(region.column))])))
        }
        return members
    }

    /// `text` as a sentence: a full stop added unless it already ends with one (or with `?`, `!`), so that a message
    /// ending in a question reads "Did you mean NSExceptionDomains? Fix: …", not "…?. Fix".
    static func sentence(_ text: String) -> String {
        guard let last = text.last, !".?!".contains(last) else { return text }
        return text + "."
    }

    /// A relative or absolute path as a URI reference (RFC 3986): characters outside the unreserved set and `/`
    /// are percent-encoded, so `My App.ipa` becomes `My%20App.ipa`.
    static func uriReference(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            let c = Character(UnicodeScalar(byte))
            if c.isASCII && (c.isLetter || c.isNumber || "-._~/".contains(c)) {
                out.append(c)
            } else {
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return out
    }
}
