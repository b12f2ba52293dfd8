/// How serious a finding is. Ordered: `note < warning < error`.
public enum LintSeverity: String, Sendable, Codable, CaseIterable, Comparable {
    /// Worth knowing; the policy does what it says.
    case note
    /// The policy works as written but weakens security, needs App Review justification, or works only by a
    /// reading of Apple's behaviour that is unconfirmed (a number in a Boolean key).
    case warning
    /// The author's intent is lost: ATS ignores or misreads the setting.
    case error

    private var rank: Int {
        switch self {
        case .note: 0
        case .warning: 1
        case .error: 2
        }
    }

    /// Orders by seriousness.
    public static func < (a: LintSeverity, b: LintSeverity) -> Bool { a.rank < b.rank }
}

/// One problem found in an ATS dictionary.
public struct LintFinding: Sendable, Equatable, Codable {
    /// How serious the finding is (usually the rule's default).
    public let severity: LintSeverity
    /// Stable rule identifier (`ATS001` …), see `LintRule`.
    public let ruleID: String
    /// Keys from the Info.plist root down to the offending key, e.g.
    /// `["NSAppTransportSecurity", "NSExceptionDomains", "example.com", "NSExceptionMinimumTLSVersion"]`.
    public let keyPath: [String]
    /// What is wrong and what ATS does with it.
    public let message: String
    /// A concrete change that resolves the finding.
    public let fix: String

    /// A finding; `keyPath` starts at the Info.plist root.
    public init(severity: LintSeverity, ruleID: String, keyPath: [String], message: String, fix: String) {
        self.severity = severity
        self.ruleID = ruleID
        self.keyPath = keyPath
        self.message = message
        self.fix = fix
    }

    /// The key path joined with `/`, as SARIF's logical location and the text report show it.
    public var keyPathString: String { keyPath.joined(separator: "/") }
}
