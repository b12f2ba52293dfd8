/// Something the decoder noticed while reading the ATS dictionary: a key of the wrong type (ignored, default
/// used), a value Apple's parser rejects, a key that does nothing on the simulated OS. `lint` and `explain` show
/// these; the policy itself already behaves as iOS would.
public struct PolicyDiagnostic: Sendable, Hashable, Codable, CustomStringConvertible {
    /// How much the finding matters.
    public enum Severity: String, Sendable, Hashable, Codable, Comparable {
        /// Information: the key works, but in a way worth knowing.
        case info
        /// The key is accepted but risky or without effect on the simulated OS.
        case warning
        /// The key or value is ignored and the default applies.
        case error

        private var rank: Int {
            switch self {
            case .info: 0
            case .warning: 1
            case .error: 2
            }
        }
        public static func < (a: Severity, b: Severity) -> Bool { a.rank < b.rank }
    }

    /// Path from the Info.plist root, e.g. `["NSAppTransportSecurity", "NSExceptionDomains", "a.com", "…"]`.
    public var keyPath: [String]
    /// How much it matters.
    public var severity: Severity
    /// One sentence: what is wrong and what iOS does instead.
    public var problem: String

    /// A finding at `keyPath`.
    public init(keyPath: [String], severity: Severity, problem: String) {
        self.keyPath = keyPath
        self.severity = severity
        self.problem = problem
    }

    /// `NSAppTransportSecurity › NSExceptionDomains › a.com`.
    public var keyPathString: String { keyPath.joined(separator: " › ") }

    public var description: String { "\(severity): \(keyPathString): \(problem)" }
}
