extension FilterCondition {
    /// The filter keys this condition reads, each once, in the order they first appear (`problems` included).
    public var keys: [String] {
        var seen: [String] = []
        func visit(_ c: FilterCondition) {
            let key: String
            switch c {
            case .host: key = "host"
            case .outcome: key = "verdict"
            case .status, .noStatus: key = "status"
            case .method: key = "method"
            case .text: key = "text"
            case .code: key = "code"
            case .run: key = "run"
            case .problems: key = "problems"
            case .not(let inner): return visit(inner)
            case .all(let terms), .any(let terms): return terms.forEach(visit)
            }
            if !seen.contains(key) { seen.append(key) }
        }
        visit(self)
        return seen
    }

    /// The earliest point that knows `key` (a filter key, or `problems`); nil for `run`, which no live point knows.
    public static func earliestPoint(knowing key: String) -> FilterPoint? {
        switch key {
        case "host": .connection
        case "method", "text": .request
        case "status", "verdict", "code", "problems": .response
        default: nil
        }
    }

    /// The keys this condition reads that `point` does not know yet: a rule evaluated there would never see them,
    /// so a rule reader refuses it ("status: is known at the response point, not at the request point").
    public func unknownKeys(at point: FilterPoint) -> [String] {
        keys.filter { key in Self.earliestPoint(knowing: key).map { $0 > point } ?? true }
    }

    /// The earliest point at which every key this condition reads is known; nil when one never is (`run:`).
    public var earliestPoint: FilterPoint? {
        var point = FilterPoint.connection
        for key in keys {
            guard let p = Self.earliestPoint(knowing: key) else { return nil }
            point = max(point, p)
        }
        return point
    }
}
