import ATSPolicy
// The filter language (FilterCondition, FilterSyntaxError) is part of this module's API, as before it moved.
@_exported import FilterCore
import GRDB
import ProxyTrace

/// Which exchanges a listing shows. Every condition set must hold; nil conditions do not filter. `condition` holds
/// what the filter language (`CaptureFilter(parsing:)`) says: any tree of conditions with `not`, `and` and `or`.
public struct CaptureFilter: Sendable, Equatable {
    /// A host (`api.example.com`), or a domain and every name below it (`.example.com`). Case-insensitive.
    public var host: String?
    /// The verdict.
    public var outcome: ExchangeSummary.ATSOutcome?
    /// Statuses, e.g. 500...599.
    public var status: ClosedRange<Int>?
    public var method: String?
    /// Text the URL contains (case-insensitive for ASCII).
    public var text: String?
    /// One run of the file; nil for all.
    public var runID: Int64?
    /// A condition tree, in addition to the fields above.
    public var condition: CaptureCondition?

    public init(
        host: String? = nil, outcome: ExchangeSummary.ATSOutcome? = nil, status: ClosedRange<Int>? = nil,
        method: String? = nil, text: String? = nil, runID: Int64? = nil, condition: CaptureCondition? = nil
    ) {
        self.host = host
        self.outcome = outcome
        self.status = status
        self.method = method
        self.text = text
        self.runID = runID
        self.condition = condition
    }

    /// SQL conditions (ANDed) over the `exchanges` table aliased `e`, and their arguments, in one dialect: SQLite
    /// (a capture file) or PostgreSQL (the team store). One definition of each condition serves both; the dialect
    /// decides only placeholders, case-insensitive matching and the literals of truth.
    struct SQL {
        var dialect = SQLDialect.sqlite
        var conditions: [String] = []
        /// The arguments in placeholder order.
        var values: [SQLArgument] = []

        init(dialect: SQLDialect = .sqlite, values: [SQLArgument] = []) {
            self.dialect = dialect
            self.values = values
        }

        /// Appends `value` and returns its placeholder: `?` for SQLite, `$n` for PostgreSQL.
        mutating func bind(_ value: SQLArgument) -> String {
            values.append(value)
            return dialect == .sqlite ? "?" : "$\(values.count)"
        }

        /// The arguments for GRDB (SQLite).
        var arguments: StatementArguments {
            StatementArguments(values.map { value -> DatabaseValue in
                switch value {
                case .integer(let v): v.databaseValue
                case .text(let v): v.databaseValue
                }
            })
        }

        /// `LIKE`, ASCII-case-insensitive in SQLite; PostgreSQL's is case-sensitive, its `ILIKE` is not.
        var caseInsensitiveLike: String { dialect == .sqlite ? "LIKE" : "ILIKE" }
        /// A condition that holds (or not) for no NULL: SQLite compares with `IS NOT 1`, PostgreSQL with `IS NOT TRUE`.
        var isNotTrue: String { dialect == .sqlite ? "IS NOT 1" : "IS NOT TRUE" }
        var trueLiteral: String { dialect == .sqlite ? "1" : "TRUE" }
        var falseLiteral: String { dialect == .sqlite ? "0" : "FALSE" }
    }

    func compile(into sql: inout SQL) {
        var parts: [CaptureCondition] = []
        if let host { parts.append(.host(host)) }
        if let outcome { parts.append(.outcome(outcome)) }
        if let status { parts.append(.status(status)) }
        if let method { parts.append(.method(method)) }
        if let text { parts.append(.text(text)) }
        if let runID { parts.append(.run(runID)) }
        if let condition = condition?.normalized {
            // A top-level AND is flattened, so that each of its indexable terms stays a condition of its own.
            if case .all(let terms) = condition { parts += terms } else { parts.append(condition) }
        }
        for part in parts { sql.conditions.append(part.sql(&sql)) }
    }
}

/// The SQL a filter compiles to: a capture file's (SQLite) or the team store's (PostgreSQL).
public enum SQLDialect: Sendable {
    case sqlite, postgres
}

/// A value bound to a filter's placeholder.
enum SQLArgument: Equatable {
    case integer(Int64)
    case text(String)
}

/// The filter language's condition tree, under the name CaptureStore has always given it.
public typealias CaptureCondition = FilterCondition

extension CaptureFilter {
    /// The keys of `KEY:VALUE` terms, for error messages and help.
    public static let filterKeys = FilterCondition.keys

    /// The filter an expression of the filter language describes (`FilterCondition(parsing:)`, docs/capture.md).
    public init(parsing expression: String) throws(FilterSyntaxError) {
        self.init(condition: try FilterCondition(parsing: expression))
    }
}

extension FilterCondition {
    /// What makes an exchange a problem: blocked, an ATS violation, a failed connect, a status of 400 or more, or
    /// cut off before its end. Word for word the condition of the partial index `exchanges_problems` (capture schema
    /// step 1, the team store's step 2), so that SQLite and PostgreSQL use it; the schema states it on its own, since
    /// a released step never changes, and a test holds the two to the same text.
    static let problemsSQL =
        "(outcome IN ('blocked', 'violation', 'failed') OR status >= 400 OR interruption IS NOT NULL)"

    /// The condition as SQL over `e` in `sql`'s dialect, binding its arguments there. SQL's NULL never leaks out
    /// of a negation: `not status:4xx` holds for an exchange without a status.
    func sql(_ sql: inout CaptureFilter.SQL) -> String {
        switch self {
        case .host(let host):
            let host = host.lowercased()
            if host.hasPrefix(".") {
                let exact = sql.bind(.text(String(host.dropFirst())))
                // Hosts are stored lowercased: a plain LIKE, whose case rules differ between the two, is enough.
                return "(e.host = \(exact) OR e.host LIKE \(sql.bind(.text("%" + Self.likeEscaped(host)))) ESCAPE '\\')"
            }
            return "e.host = " + sql.bind(.text(host))
        case .outcome(let outcome):
            let condition = "e.outcome = " + sql.bind(.text(outcome.rawValue))
            // A problem verdict implies the problems condition: said too, so SQLite reads the problems' index.
            switch outcome {
            case .blocked, .violation, .failed: return "(" + condition + " AND " + Self.problemsSQL + ")"
            case .allowed, .notEvaluated: return condition
            }
        case .status(let range):
            let condition: String
            if range.lowerBound == range.upperBound {
                condition = "e.status = " + sql.bind(.integer(Int64(range.lowerBound)))
            } else {
                let low = sql.bind(.integer(Int64(range.lowerBound)))
                condition = "e.status BETWEEN \(low) AND " + sql.bind(.integer(Int64(range.upperBound)))
            }
            return range.lowerBound >= 400 ? "(" + condition + " AND " + Self.problemsSQL + ")" : condition
        case .noStatus:
            return "e.status IS NULL"
        case .method(let method):
            return "e.method = " + sql.bind(.text(method))
        case .text(let text):
            let pattern = sql.bind(.text("%" + Self.likeEscaped(text) + "%"))
            return "e.url \(sql.caseInsensitiveLike) \(pattern) ESCAPE '\\'"
        case .code(let code):
            // `errors` holds `-1200/-9836,-1022`: each code between separators.
            return "(',' || replace(e.errors, '/', ',') || ',') LIKE " + sql.bind(.text("%," + String(code) + ",%"))
        case .run(let run):
            return "e.run_id = " + sql.bind(.integer(run))
        case .problems:
            return Self.problemsSQL
        case .not(let inner):
            return "((" + inner.sql(&sql) + ") \(sql.isNotTrue))"
        case .all(let terms):
            guard !terms.isEmpty else { return sql.trueLiteral }
            var parts: [String] = []
            for term in terms { parts.append(term.sql(&sql)) }
            return "(" + parts.joined(separator: " AND ") + ")"
        case .any(let terms):
            guard !terms.isEmpty else { return sql.falseLiteral }
            var parts: [String] = []
            for term in terms { parts.append(term.sql(&sql)) }
            return "(" + parts.joined(separator: " OR ") + ")"
        }
    }

    private static func likeEscaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
            .replacingOccurrences(of: "_", with: "\\_")
    }
}
