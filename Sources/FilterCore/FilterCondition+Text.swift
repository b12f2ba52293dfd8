extension FilterCondition: CustomStringConvertible {
    /// The condition written in the filter language, so that `FilterCondition(parsing:)` gives it back: terms in
    /// their canonical spelling (`status:4xx`, `verdict:ok`), values quoted when they hold spaces, parentheses or
    /// quotes, and parentheses around each nested `and`/`or` (as deep as the parsed expression had them).
    public var description: String { text(nested: false) }

    private func text(nested: Bool) -> String {
        switch self {
        case .host(let host): return "host:" + Self.value(host)
        case .outcome(let outcome):
            let word =
                switch outcome {
                case .allowed: "ok"
                case .blocked: "blocked"
                case .violation: "violation"
                case .failed: "failed"
                case .notEvaluated: "n/a"
                }
            return "verdict:" + word
        case .status(let range):
            let low = range.lowerBound
            let high = range.upperBound
            if low == high { return "status:\(low)" }
            if low % 100 == 0, high == low + 99, (1...5).contains(low / 100) { return "status:\(low / 100)xx" }
            return "status:\(low)-\(high)"
        case .noStatus: return "status:none"
        case .method(let method): return "method:" + Self.value(method)
        case .text(let text): return "text:" + Self.value(text)
        case .code(let code): return "code:\(code)"
        case .run(let run): return "run:\(run)"
        case .problems: return "problems"
        case .not(let inner): return "not " + inner.text(nested: true)
        case .all(let terms):
            let body = terms.map { $0.text(nested: true) }.joined(separator: " ")
            return nested ? "(" + body + ")" : body
        case .any(let terms):
            let body = terms.map { $0.text(nested: true) }.joined(separator: " or ")
            return nested ? "(" + body + ")" : body
        }
    }

    /// A value as the tokenizer reads it back: bare when it can be, else quoted with `\` before `"` and `\`.
    private static func value(_ value: String) -> String {
        let bare = !value.isEmpty && !value.contains { $0.isWhitespace || $0 == "(" || $0 == ")" || $0 == "\"" }
        if bare { return value }
        var quoted = "\""
        for c in value {
            if c == "\"" || c == "\\" { quoted.append("\\") }
            quoted.append(c)
        }
        return quoted + "\""
    }
}
