import ProxyTrace

// Theory of operation:
//
// The in-memory twin of CaptureStore's SQL: the same condition, evaluated on the facts a rule point knows, gives
// the answer its SQL gives on the exchange's captured row, so a filter tried with `show --filter` on yesterday's
// capture selects the same exchanges as a rule today. Each term reads one field; `not`, `and`, `or` are two-valued
// (the SQL is too: its negation is `IS NOT 1`, so a missing status makes `status:4xx` false and its negation
// true). Which fields a point knows is `unknownKeys(at:)`'s business, checked once when a rule is read; here an
// unknown field simply does not match.

extension FilterCondition {
    /// Whether the exchange the facts describe meets the condition.
    public func matches(_ facts: ExchangeFacts) -> Bool {
        switch self {
        case .host(let host):
            let host = host.lowercased()
            if host.hasPrefix(".") { return facts.host == host.dropFirst() || facts.host.hasSuffix(host) }
            return facts.host == host
        case .outcome(let outcome):
            return facts.outcome == outcome
        case .status(let range):
            return facts.status.map(range.contains) ?? false
        case .noStatus:
            return facts.status == nil
        case .method(let method):
            return facts.method == method
        case .text(let text):
            guard let url = facts.url else { return false }
            return Self.asciiLowercased(url).contains(Self.asciiLowercased(text))
        case .code(let code):
            return facts.errorCodes.contains(code)
        case .run:
            // A capture's notion: a live exchange belongs to no earlier run. Refused at rule points (unknownKeys).
            return false
        case .problems:
            switch facts.outcome {
            case .blocked, .violation, .failed: return true
            case .allowed, .notEvaluated, nil: break
            }
            return (facts.status ?? 0) >= 400 || facts.interrupted
        case .not(let inner):
            return !inner.matches(facts)
        case .all(let terms):
            return terms.allSatisfy { $0.matches(facts) }
        case .any(let terms):
            return terms.contains { $0.matches(facts) }
        }
    }

    /// SQLite's `LIKE` folds ASCII letters only; so does this, so `text:` agrees with a capture file.
    private static func asciiLowercased(_ text: String) -> [UInt8] {
        text.utf8.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
    }
}

extension Array where Element == UInt8 {
    fileprivate func contains(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty else { return true }
        guard needle.count <= count else { return false }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if self[start..<start + needle.count].elementsEqual(needle) { return true }
        }
        return false
    }
}

extension FilterCondition {
    /// Whether the condition can still hold once the exchange goes on: false only when the facts known at
    /// `facts.point` already decide it (a response rule for another host, at the request head), so a rules stage
    /// drops the rule for this exchange's later points instead of asking it again at each one.
    public func mayMatch(_ facts: ExchangeFacts) -> Bool { known(facts) != false }

    /// Three-valued: true or false when the facts decide the condition, nil when it reads a field not known yet.
    func known(_ facts: ExchangeFacts) -> Bool? {
        switch self {
        case .host:
            return matches(facts)
        case .method, .text:
            return facts.point >= .request ? matches(facts) : nil
        case .outcome, .status, .noStatus, .code, .problems:
            return facts.point >= .response ? matches(facts) : nil
        case .run:
            return false
        case .not(let inner):
            return inner.known(facts).map { !$0 }
        case .all(let terms):
            var unknown = false
            for term in terms {
                switch term.known(facts) {
                case false?: return false
                case nil: unknown = true
                case true?: break
                }
            }
            return unknown ? nil : true
        case .any(let terms):
            var unknown = false
            for term in terms {
                switch term.known(facts) {
                case true?: return true
                case nil: unknown = true
                case false?: break
                }
            }
            return unknown ? nil : false
        }
    }
}
