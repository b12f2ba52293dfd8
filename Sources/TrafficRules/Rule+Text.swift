import FilterCore

extension Rule {
    /// The rule in its normalized rules-file spelling, which `RuleSet.parse(file:path:)` reads back to the same
    /// rule: `[name] keyword argument`, the filter in its canonical form, a separator that no clause holds.
    public var text: String {
        var words: [String] = []
        if let name { words.append("[\(name)]") }
        words.append(keywordText)
        words.append(argumentText)
        return words.joined(separator: " ")
    }

    /// The keyword, with `:request` or `:response` when a modify rule's points are not the default for its filter.
    private var keywordText: String {
        switch action {
        case .modifyHeaders, .modifyBody:
            let both = points.count == 2
            if both { return action.keyword }
            let onResponse = points.first.map { $0 >= .responseHead } ?? false
            // A response field in the filter puts the rule on the response alone by itself.
            if onResponse, let filter, (filter.earliestPoint ?? .response) == .response { return action.keyword }
            return action.keyword + (onResponse ? ":response" : ":request")
        default:
            return action.keyword
        }
    }

    private var filterText: String? { filter.map(\.description) }

    /// Whether the filter reads a response field (a breakpoint on it holds the response alone by itself).
    private var readsResponse: Bool { filter.map { ($0.earliestPoint ?? .request) > .request } ?? false }

    private var argumentText: String {
        switch action {
        case .mapLocal(let regex, let path): return Self.spec([filterText, regex, path])
        case .modifyHeaders(let name, let value): return Self.spec([filterText, name, value?.description ?? ""])
        case .modifyBody(let regex, let replacement): return Self.spec([filterText, regex, replacement.description])
        case .answer(let status, let headers, let body):
            return Self.spec([filterText, String(status)] + headers.map { "\($0.name): \($0.value)" } + [body.description])
        case .fault(let kind): return target(kind.description, optional: false)
        case .block(let kind): return target(kind.rawValue, optional: true)
        case .breakpoint:
            let phase = points == [.requestHead] ? "request:" : points == [.responseHead] && !readsResponse ? "response:" : ""
            return phase + (filterText ?? "*")
        case .throttle(let reference):
            // Only a host pattern reads as a throttle's filter.
            let pattern = hostPattern ?? "*"
            return pattern == "*" ? reference.description : reference.description + "@" + pattern
        }
    }

    /// A fault's or block's target: `HOST-PATTERN=KIND` when the filter is a host, else `/FILTER/KIND`.
    private func target(_ kind: String, optional: Bool) -> String {
        if let pattern = hostPattern { return optional && kind == BlockKind.reset.rawValue ? pattern : pattern + "=" + kind }
        return Self.spec([filterText, kind])
    }

    /// The filter as a host pattern, when it is one (or there is none: `*`).
    private var hostPattern: String? {
        switch filter {
        case nil: return "*"
        case .host(let host)?:
            // A filter's host may hold what a pattern cannot (`host:"a=b"`): then it stays a filter.
            let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-.:[]_")
            let name = host.hasPrefix(".") ? host.dropFirst() : host[...]
            guard !name.isEmpty, !name.hasPrefix("."), !name.contains(".."), name.allSatisfy(allowed.contains)
            else { return nil }
            return host.hasPrefix(".") ? "*" + host : host
        default: return nil
        }
    }

    /// Clauses joined by the first separator none of them holds (`/` when each does: then the spec is ambiguous).
    static func spec(_ clauses: [String?]) -> String {
        let present = clauses.compactMap { $0 }
        let separator = RuleParser.separators.first { s in !present.contains { $0.contains(s) } } ?? "/"
        return String(separator) + present.joined(separator: String(separator))
    }
}
