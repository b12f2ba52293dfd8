import FilterCore

// Theory of operation:
//
// A rule is (filter?, points, action): at each of its points, a rule stage evaluates the filter on what it knows of
// the exchange (`FilterCondition.matches(ExchangeFacts)`) and, when it holds (or there is none), applies the
// action. Rules are values, read once from CLI options and rules files by one parser (`RuleParser`), which decides
// each rule's points from its action and filter and refuses, with the column, a filter on a field its point cannot
// know yet (`status:` on a map-local rule): nothing downstream ever meets a rule that cannot work. A set of rules
// is all or nothing (`RuleSet`): a file with one bad line yields its errors and no rules.

/// One rule: which exchanges (`filter`), where in them (`points`), what to do (`action`), and where it was written.
public struct Rule: Sendable, Equatable {
    /// Unique in a rule set: the name the author gave (`[mock-login]`), else the source (`rules.txt:3`, `--fault #2`).
    public var id: String { name ?? source.description }
    /// The author's name for the rule, if any.
    public var name: String?
    /// The exchanges the rule applies to; nil for all.
    public var filter: FilterCondition?
    /// Where in an exchange the rule acts, in exchange order.
    public var points: [RulePoint]
    public var action: RuleAction
    public var source: RuleSource

    public init(name: String? = nil, filter: FilterCondition?, points: [RulePoint], action: RuleAction, source: RuleSource) {
        self.name = name
        self.filter = filter
        self.points = points
        self.action = action
        self.source = source
    }

    /// Whether the rule applies to the exchange the facts describe (evaluated at one of `points`).
    public func applies(to facts: ExchangeFacts) -> Bool {
        filter?.matches(facts) ?? true
    }
}

/// The fixed points of an exchange where rules act (issue 33): before the upstream is contacted, then at each head
/// and body.
public enum RulePoint: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    /// Before the upstream is contacted: fault, block, throttle.
    case connection
    case requestHead
    case requestBody
    case responseHead
    case responseBody

    /// What the filter language knows there.
    public var filterPoint: FilterPoint {
        switch self {
        case .connection: .connection
        case .requestHead, .requestBody: .request
        case .responseHead, .responseBody: .response
        }
    }

    public static func < (a: RulePoint, b: RulePoint) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .connection: "connection"
        case .requestHead: "request-head"
        case .requestBody: "request-body"
        case .responseHead: "response-head"
        case .responseBody: "response-body"
        }
    }
}

/// Where a rule was written: a rules file's line, or the n-th use of a CLI option.
public enum RuleSource: Sendable, Equatable, CustomStringConvertible {
    case file(path: String, line: Int)
    /// `--fault` (the option as typed), 1-based among its uses.
    case option(String, index: Int)

    /// `rules.txt:3`, `--fault #2`.
    public var description: String {
        switch self {
        case .file(let path, let line): "\(path):\(line)"
        case .option(let name, let index): "\(name) #\(index)"
        }
    }
}
