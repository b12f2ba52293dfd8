import ATSPolicy

/// Checks an `NSAppTransportSecurity` value (the raw plist tree, with the file's own types) as ATS on `profile`
/// would read it, and returns findings in a stable order (by key path, then rule).
///
/// `nil` means the app has no `NSAppTransportSecurity`: Apple's defaults apply and there is nothing to lint.
/// Key semantics follow the project's ATS fact sheet (ats-reference.md §1–§2); rules cite its sections.
public func lint(_ ats: PlistValue?, profile: IOSProfile) -> [LintFinding] {
    guard let ats else { return [] }
    var linter = Linter(profile: profile)
    linter.lintRoot(ats)
    return linter.sortedFindings
}

/// Findings for ATS keys that sit at the top level of an Info.plist instead of inside `NSAppTransportSecurity`
/// (`LoadedPolicy.misplacedATSKeys`): ATS never reads them there.
public func lintInfoPlistRoot(misplacedATSKeys: [String]) -> [LintFinding] {
    misplacedATSKeys.map { key in
        LintFinding(
            severity: LintRule.atsKeyOutsideATS.defaultSeverity, ruleID: LintRule.atsKeyOutsideATS.rawValue,
            keyPath: [key],
            message: "\(key) is at the top level of the Info.plist, outside NSAppTransportSecurity; ATS never reads "
                + "it there, so it has no effect",
            fix: "move \(key) inside the NSAppTransportSecurity dictionary")
    }
}

/// Accumulates findings while walking the tree.
struct Linter {
    let profile: IOSProfile
    private(set) var findings: [LintFinding] = []

    init(profile: IOSProfile) { self.profile = profile }

    /// The root of every key path.
    static let root = "NSAppTransportSecurity"

    mutating func add(
        _ rule: LintRule, _ path: [String], _ message: String, fix: String, severity: LintSeverity? = nil
    ) {
        findings.append(
            LintFinding(
                severity: severity ?? rule.defaultSeverity, ruleID: rule.rawValue, keyPath: path, message: message,
                fix: fix))
    }

    /// Findings ordered by key path (component by component), keeping discovery order within one path.
    var sortedFindings: [LintFinding] {
        findings.enumerated().sorted { a, b in
            if a.element.keyPath != b.element.keyPath {
                return a.element.keyPath.lexicographicallyPrecedes(b.element.keyPath)
            }
            return a.offset < b.offset
        }.map(\.element)
    }
}
