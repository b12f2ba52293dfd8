import ProxyTrace

// Theory of operation:
//
// The filter language of `show`, `har` and the live view: readable words in the spirit of mitmproxy's `~d ~s ~q`.
//
//   expression := all ( "or" all )*
//   all        := unary ( ["and"] unary )*          (juxtaposition is AND)
//   unary      := ("not" | "-") unary | "(" expression ")" | term
//   term       := KEY ":" VALUE | "problems"
//
// A tokenizer cuts the text into words and parentheses, each with its column; quotes (`text:"two words"`) keep
// spaces and parentheses in a value. A recursive-descent parser (one function per rule) builds a
// `FilterCondition`; the first problem stops it with a `FilterSyntaxError` that says where and what was expected.
// Nesting is bounded (`maxDepth`), so a hostile expression cannot exhaust the stack, ours or SQLite's parser's; so
// is the number of conditions (`maxTerms`), which SQLite's expression depth bounds.

extension FilterCondition {
    /// The keys of `KEY:VALUE` terms, for error messages and help.
    public static let keys = ["host", "status", "verdict", "method", "text", "code", "run"]

    /// The condition an expression of the filter language describes (see docs/capture.md):
    /// `host:api.example.com status:4xx -verdict:ok method:POST text:login`, `problems`, `not host:.cdn.example`,
    /// `verdict:blocked or status:5xx`, parentheses. Words are ANDed; `or` binds looser than juxtaposition.
    public init(parsing expression: String) throws(FilterSyntaxError) {
        var parser = FilterParser(expression)
        self = try parser.parse()
    }
}

private struct FilterToken {
    enum Kind: Equatable {
        case word
        case open
        case close
        case end
    }

    var kind: Kind
    /// The word with its quotes removed.
    var text: String
    /// 1-based, in characters.
    var column: Int
    /// Part of the word was quoted: it is a value, never a keyword.
    var quoted: Bool
    /// The column where the value starts (after `key:`), for messages about the value.
    var valueColumn: Int
    /// The word has a `:` outside quotes: a `KEY:VALUE` term.
    var hasColon = false
    /// The word starts with a `-` outside quotes: a negated term.
    var dashed = false
}

private struct FilterParser {
    let expression: String
    var tokens: [FilterToken] = []
    var index = 0
    var depth = 0
    var tokenizeError: FilterSyntaxError?
    /// Parentheses and negations nested deeper are an error. Bounds the parser's recursion, and the SQL's nesting:
    /// SQLite's parser refuses an expression much past 30 levels, which the deepest filters of the worst shapes
    /// (and/or alternating in parentheses, negated terms at the bottom) reach at 30 (a test runs them at this bound).
    static let maxDepth = 20
    /// Conditions (`KEY:VALUE` and `problems`) past this many are an error: SQLite joins a chain of them into an
    /// expression one level deeper per condition, and refuses one deeper than 1,000 ("Expression tree is too large").
    static let maxTerms = 256
    var terms = 0

    init(_ expression: String) {
        self.expression = expression
        do { tokens = try Self.tokenize(expression) } catch { tokenizeError = error }
    }

    mutating func parse() throws(FilterSyntaxError) -> FilterCondition {
        if let tokenizeError { throw tokenizeError }
        guard tokens.first?.kind != .end else {
            throw error(at: 1, "an empty filter; expected a condition such as host:api.example.com or problems")
        }
        let condition = try parseAny()
        let token = tokens[index]
        switch token.kind {
        case .close: throw error(at: token.column, "a ) with no ( before it")
        case .end: return condition
        case .word, .open: throw error(at: token.column, "expected a condition")
        }
    }

    private func error(at column: Int, _ message: String) -> FilterSyntaxError {
        FilterSyntaxError(expression: expression, column: column, message: message)
    }

    private func isKeyword(_ token: FilterToken, _ word: String) -> Bool {
        token.kind == .word && !token.quoted && token.text.lowercased() == word
    }

    /// `or`, or `|`.
    private func isOr(_ token: FilterToken) -> Bool {
        isKeyword(token, "or") || isKeyword(token, "|")
    }

    private mutating func parseAny() throws(FilterSyntaxError) -> FilterCondition {
        var terms = [try parseAll()]
        while isOr(tokens[index]) {
            index += 1
            terms.append(try parseAll())
        }
        return terms.count == 1 ? terms[0] : .any(terms)
    }

    private mutating func parseAll() throws(FilterSyntaxError) -> FilterCondition {
        var terms: [FilterCondition] = []
        while true {
            let token = tokens[index]
            if token.kind == .end || token.kind == .close || isOr(token) {
                guard !terms.isEmpty else {
                    let what = token.kind == .end ? "the end" : "\"\(token.kind == .close ? ")" : token.text)\""
                    throw error(at: token.column, "expected a condition before \(what)")
                }
                return terms.count == 1 ? terms[0] : .all(terms)
            }
            if isKeyword(token, "and") {
                guard !terms.isEmpty else { throw error(at: token.column, "expected a condition before \"and\"") }
                index += 1
                let next = tokens[index]
                if next.kind == .end || next.kind == .close || isOr(next) {
                    throw error(at: next.column, "expected a condition after \"and\"")
                }
                continue
            }
            terms.append(try parseUnary())
        }
    }

    private mutating func parseUnary() throws(FilterSyntaxError) -> FilterCondition {
        let token = tokens[index]
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maxDepth else { throw error(at: token.column, "nested more than \(Self.maxDepth) deep") }
        if isKeyword(token, "not") {
            index += 1
            let next = tokens[index]
            if next.kind == .end || next.kind == .close || isOr(next) || isKeyword(next, "and") {
                throw error(at: next.column, "expected a condition after \"not\"")
            }
            return .not(try parseUnary())
        }
        if token.kind == .word, !token.quoted, token.text == "-" {
            throw error(at: token.column, "expected a condition right after \"-\" (no space), e.g. -host:example.com")
        }
        if token.kind == .word, token.dashed {
            // `-host:x`: the rest of the word is the term.
            var rest = token
            rest.text.removeFirst()
            rest.column += 1
            rest.dashed = rest.text.hasPrefix("-") && !rest.quoted
            tokens[index] = rest
            return .not(try parseUnary())
        }
        if token.kind == .open {
            index += 1
            let inner = try parseAny()
            guard tokens[index].kind == .close else {
                throw error(at: tokens[index].column, "expected ) to close the ( at column \(token.column)")
            }
            index += 1
            return inner
        }
        if token.kind == .close { throw error(at: token.column, "a ) with no ( before it") }
        index += 1
        terms += 1
        guard terms <= Self.maxTerms else {
            throw error(at: token.column, "more than \(Self.maxTerms) conditions in one filter")
        }
        return try term(token)
    }

    private func term(_ token: FilterToken) throws(FilterSyntaxError) -> FilterCondition {
        guard token.hasColon, let colon = token.text.firstIndex(of: ":") else {
            if !token.quoted, token.text.lowercased() == "problems" { return .problems }
            if token.text.isEmpty { throw error(at: token.column, "expected a condition, not an empty \"\"") }
            if !token.quoted, FilterCondition.keys.contains(token.text.lowercased()) {
                throw error(at: token.column, "expected a value: \(token.text.lowercased()):VALUE")
            }
            throw error(
                at: token.column,
                "\"\(token.text)\" is not a condition; expected KEY:VALUE with a key of "
                    + FilterCondition.keys.joined(separator: ", ")
                    + ", or problems, not, or, ( ) (to search URLs: text:\(token.text))")
        }
        let key = token.text[..<colon].lowercased()
        let value = String(token.text[token.text.index(after: colon)...])
        let at = token.valueColumn
        guard FilterCondition.keys.contains(key) else {
            throw error(
                at: token.column,
                "unknown key \"\(key)\"; expected one of " + FilterCondition.keys.joined(separator: ", "))
        }
        guard !value.isEmpty else { throw error(at: at, "expected a value after \(key):") }
        switch key {
        case "host":
            var host = value.lowercased()
            if host.hasPrefix("*.") { host.removeFirst() }
            return .host(host)
        case "status":
            if let status = Self.status(value) { return status }
            throw error(
                at: at, "\"\(value)\" is not a status; expected 404, a class such as 4xx, a range such as 400-499, or none")
        case "verdict":
            if let outcome = Self.verdicts[value.lowercased()] { return .outcome(outcome) }
            throw error(at: at, "\"\(value)\" is not a verdict; expected ok, blocked, violation, failed or n/a")
        case "method":
            guard value.allSatisfy({ $0.isLetter || $0 == "-" }) else {
                throw error(at: at, "\"\(value)\" is not a method; expected a word such as GET or POST")
            }
            return .method(value.uppercased())
        case "text":
            return .text(value)
        case "code":
            guard let code = Int(value) else {
                throw error(at: at, "\"\(value)\" is not an error code; expected a number such as -1200 or -9836")
            }
            return .code(code)
        default:  // run
            guard let run = Int64(value), run > 0 else {
                throw error(at: at, "\"\(value)\" is not a run number; expected 1, 2, …")
            }
            return .run(run)
        }
    }

    static let verdicts: [String: ExchangeSummary.ATSOutcome] = [
        "ok": .allowed, "allowed": .allowed, "blocked": .blocked, "violation": .violation, "annotated": .violation,
        "failed": .failed, "n/a": .notEvaluated, "na": .notEvaluated, "none": .notEvaluated,
        "notevaluated": .notEvaluated,
    ]

    /// `404`, `4xx`, `400-499`, `none`.
    static func status(_ value: String) -> FilterCondition? {
        let v = value.lowercased()
        if v == "none" { return .noStatus }
        if v.count == 3, v.hasSuffix("xx"), let digit = v.first?.wholeNumberValue, (1...5).contains(digit) {
            return .status(digit * 100...digit * 100 + 99)
        }
        let bounds = v.split(separator: "-", omittingEmptySubsequences: false)
        if bounds.count == 2, let low = Int(bounds[0]), let high = Int(bounds[1]), (100...999).contains(low),
            (100...999).contains(high), low <= high
        {
            return .status(low...high)
        }
        if let code = Int(v), (100...999).contains(code) { return .status(code...code) }
        return nil
    }

    /// Words and parentheses with their columns; quotes kept out of the words' text.
    static func tokenize(_ text: String) throws(FilterSyntaxError) -> [FilterToken] {
        let chars = Array(text)
        var tokens: [FilterToken] = []
        var i = 0
        while i < chars.count {
            let c = chars[i]
            if c.isWhitespace {
                i += 1
                continue
            }
            if c == "(" || c == ")" {
                tokens.append(
                    FilterToken(kind: c == "(" ? .open : .close, text: String(c), column: i + 1, quoted: false, valueColumn: i + 1))
                i += 1
                continue
            }
            let start = i
            var word = ""
            var quoted = false
            var valueColumn = start + 1
            while i < chars.count, !chars[i].isWhitespace, chars[i] != "(", chars[i] != ")" {
                if chars[i] == "\"" {
                    let open = i
                    quoted = true
                    i += 1
                    while i < chars.count, chars[i] != "\"" {
                        if chars[i] == "\\", i + 1 < chars.count { i += 1 }
                        word.append(chars[i])
                        i += 1
                    }
                    guard i < chars.count else {
                        throw FilterSyntaxError(
                            expression: text, column: open + 1, message: "a quote with no closing quote")
                    }
                    i += 1
                    continue
                }
                if chars[i] == ":", valueColumn == start + 1, !quoted { valueColumn = i + 2 }
                word.append(chars[i])
                i += 1
            }
            var token = FilterToken(kind: .word, text: word, column: start + 1, quoted: quoted, valueColumn: valueColumn)
            token.hasColon = valueColumn != start + 1
            token.dashed = chars[start] == "-" && word.count > 1
            tokens.append(token)
        }
        tokens.append(
            FilterToken(kind: .end, text: "", column: chars.count + 1, quoted: false, valueColumn: chars.count + 1))
        return tokens
    }
}
