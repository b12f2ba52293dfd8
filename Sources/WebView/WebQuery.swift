import Foundation
import CaptureStore
import ProxyTrace

/// A listing's parameters, read from the query: the filter, the cursor and the page size. Every parameter is
/// checked; one the API does not know, or a value it cannot read, is an error naming it (answered `400`), never
/// silently ignored: a script with a typo would otherwise read the whole session as if filtered.
struct WebListQuery: Equatable {
    var filter = CaptureFilter()
    var before: Int64?
    var after: Int64?
    var limit = 100

    static let maximumLimit = 1000
    static let filterNames: Set<String> = ["host", "verdict", "status", "method", "text", "problems", "run", "q"]

    /// - Parameter paging: whether `before`, `after` and `limit` are allowed (a count takes only the filter).
    init(_ request: WebRequest, paging: Bool = true) throws(WebQueryError) {
        // `problems` and `q` are conditions; both given, both must hold.
        var conditions: [CaptureCondition] = []
        defer { filter.condition = conditions.count > 1 ? .all(conditions) : conditions.first }
        var seen: Set<String> = []
        for (name, value) in request.query {
            // A repeated `q` or `problems` would add a condition each time: a long enough query string made SQL
            // that SQLite refuses, and a repeat of any other would silently keep only its last value.
            guard seen.insert(name).inserted else { throw WebQueryError("parameter '\(name)' is given more than once") }
            switch name {
            case "host":
                guard !value.isEmpty else { continue }
                filter.host = value
            case "verdict":
                guard !value.isEmpty else { continue }
                guard let outcome = Self.outcome(value) else {
                    throw WebQueryError(
                        "verdict '\(value)' is not one of ok, blocked, violation, notJudged, failed")
                }
                filter.outcome = outcome
            case "status":
                guard !value.isEmpty else { continue }
                guard let range = Self.statusRange(value) else {
                    throw WebQueryError(
                        "status '\(value)' is not a status (404), a class (4xx) or a range (400-499) within 100-999")
                }
                filter.status = range
            case "method":
                guard !value.isEmpty else { continue }
                guard value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                    throw WebQueryError("method '\(value)' is not an HTTP method token")
                }
                filter.method = value.uppercased()
            case "text":
                guard !value.isEmpty else { continue }
                filter.text = value
            case "problems":
                switch value {
                case "1", "true", "yes": conditions.append(.problems)
                case "", "0", "false", "no": continue
                default: throw WebQueryError("problems takes 1 or 0 (got '\(value)')")
                }
            case "q":
                // An expression of the capture filter language, as `atsproxy show --filter` takes it.
                guard !value.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
                do {
                    guard let condition = try CaptureFilter(parsing: value).condition else { continue }
                    conditions.append(condition)
                } catch {
                    throw WebQueryError("q: \(error)")
                }
            case "run":
                guard let run = Int64(value), run > 0 else { throw WebQueryError("run '\(value)' is not a run id") }
                filter.runID = run
            case "before" where paging, "after" where paging:
                guard let id = Int64(value), id >= 0 else {
                    throw WebQueryError("\(name) '\(value)' is not an exchange id")
                }
                if name == "before" { before = id } else { after = id }
            case "limit" where paging:
                guard let n = Int(value), (1...Self.maximumLimit).contains(n) else {
                    throw WebQueryError("limit '\(value)' is not a number from 1 to \(Self.maximumLimit)")
                }
                limit = n
            default:
                let known = (Self.filterNames.union(paging ? ["before", "after", "limit"] : [])).sorted()
                throw WebQueryError("unknown parameter '\(name)' (known: \(known.joined(separator: ", ")))")
            }
        }
        if before != nil && after != nil {
            throw WebQueryError("give before or after, not both")
        }
    }

    /// The API's verdict words: those of the page (`ok`, `notJudged`) and the record's own (`allowed`,
    /// `notEvaluated`).
    static func outcome(_ text: String) -> ExchangeSummary.ATSOutcome? {
        switch text.lowercased() {
        case "ok", "allowed": .allowed
        case "blocked": .blocked
        case "violation": .violation
        case "notjudged", "notevaluated", "n/a": .notEvaluated
        case "failed": .failed
        default: nil
        }
    }

    /// `404`, `4xx`, `400-499`.
    static func statusRange(_ text: String) -> ClosedRange<Int>? {
        let lower = text.lowercased()
        if lower.count == 3, lower.hasSuffix("xx"), let digit = Int(lower.prefix(1)), (1...9).contains(digit) {
            return digit * 100...digit * 100 + 99
        }
        let bounds = lower.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(bounds.count), bounds.allSatisfy({ $0.count == 3 && $0.allSatisfy(\.isASCII) }),
            let low = Int(bounds[0]), let high = Int(bounds[bounds.count - 1]), low >= 100, low <= high, high <= 999
        else { return nil }
        return low...high
    }
}

/// A request parameter the API cannot use, in words that name it.
struct WebQueryError: Error, Equatable {
    var message: String
    init(_ message: String) { self.message = message }
}
