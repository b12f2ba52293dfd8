import ATSPolicy

/// The findings for one policy file, ready to print as text, JSON or SARIF.
public struct LintReport: Sendable {
    /// The plist path the user gave (SARIF `artifactLocation.uri`).
    public let artifactPath: String
    /// Where the policy was read from, e.g. `MyApp.ipa › Payload/MyApp.app/Info.plist`.
    public let sourceDescription: String
    /// The iOS behaviour band the policy was checked against.
    public let profile: IOSProfile
    /// Findings in report order.
    public let findings: [LintFinding]
    /// How the file was interpreted (from `LoadedPolicy.notes`).
    public let notes: [String]
    /// Where each key is in the file, by key path from its root (XML plists only): SARIF results point there.
    public let keyPositions: [[String]: SourceRegion]

    /// A line and column in the artifact, from 1 (the column in UTF-16 code units, as SARIF counts by default).
    public struct SourceRegion: Sendable, Equatable {
        public var line: Int
        public var column: Int
        public init(line: Int, column: Int) {
            self.line = line
            self.column = column
        }
    }

    /// A report for `findings` on `profile` about the file at `artifactPath`.
    public init(
        artifactPath: String, sourceDescription: String, profile: IOSProfile, findings: [LintFinding],
        notes: [String] = [], keyPositions: [[String]: SourceRegion] = [:]
    ) {
        self.keyPositions = keyPositions
        self.artifactPath = artifactPath
        self.sourceDescription = sourceDescription
        self.profile = profile
        self.findings = findings
        self.notes = notes
    }

    /// Where `finding`'s key is: its own key, or, for a key that is missing or misplaced, the nearest enclosing key
    /// that is in the file. A file holding the ATS dictionary alone has its keys without the
    /// `NSAppTransportSecurity` the key paths start with.
    public func region(of finding: LintFinding) -> SourceRegion? {
        guard !keyPositions.isEmpty else { return nil }
        var candidates = [finding.keyPath]
        if finding.keyPath.first == "NSAppTransportSecurity" { candidates.append(Array(finding.keyPath.dropFirst())) }
        for var path in candidates {
            while !path.isEmpty {
                if let region = keyPositions[path] { return region }
                path.removeLast()
            }
        }
        return nil
    }

    /// Number of findings with each severity.
    public func count(_ severity: LintSeverity) -> Int { findings.filter { $0.severity == severity }.count }

    /// True when some finding is at or above `threshold` (the CLI's `--fail-on`).
    public func fails(at threshold: LintSeverity) -> Bool { findings.contains { $0.severity >= threshold } }

    /// "2 errors, 1 warning, 0 notes".
    public var summary: String {
        func n(_ count: Int, _ word: String) -> String { "\(count) \(word)\(count == 1 ? "" : "s")" }
        return "\(n(count(.error), "error")), \(n(count(.warning), "warning")), \(n(count(.note), "note"))"
    }
}
