/// A set of rules, read all or nothing: from a rules file and from CLI options. One bad rule yields every error
/// found and no rules at all, so a proxy never runs with half a file.
///
/// A rules file holds one rule a line, in the options' syntax without `--`:
///
///     # Mock the login endpoint from a file in the repository.
///     [login] map-local |host:api.example.test method:POST|^https://api\.example\.test/v1/login$|mocks/login.json
///     modify-headers /Cache-Control/no-store
///     modify-headers:response /status:5xx/Retry-After/
///     answer |text:/v1/health|503|Retry-After: 30|down for maintenance
///     fault *.staging.example.test=expired
///     throttle 3G@cdn.example.test
///
/// `#` starts a comment only at the start of a line (after spaces): a regex may hold one. Blank lines are skipped;
/// a line's leading and trailing spaces are not part of the rule. `[name]` before the keyword names the rule.
public struct RuleSet: Sendable, Equatable {
    public var rules: [Rule]

    public init(rules: [Rule] = []) {
        self.rules = rules
    }

    /// The rules of a rules file's text, or every error in it. `path` names the file in sources and errors.
    public static func parse(file text: String, path: String) -> Result<RuleSet, RuleSetError> {
        var rules: [Rule] = []
        var errors: [RuleError] = []
        var lineNumber = 0
        // "\r\n" is one Character in Swift: split at it as at "\n".
        for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            lineNumber += 1
            let source = RuleSource.file(path: path, line: lineNumber)
            let line = rawLine.hasSuffix("\r") ? rawLine.dropLast() : rawLine[...]
            do throws(RuleError) {
                if let rule = try parse(line: String(line), source: source) { rules.append(rule) }
            } catch {
                errors.append(error)
            }
        }
        errors += duplicateNames(rules)
        return errors.isEmpty ? .success(RuleSet(rules: rules)) : .failure(RuleSetError(errors: errors))
    }

    /// The rules of CLI options, in the order given: `(option, value)` pairs such as `("--fault", "*.test=expired")`.
    public static func parse(options: [(option: String, value: String)]) -> Result<RuleSet, RuleSetError> {
        var rules: [Rule] = []
        var errors: [RuleError] = []
        var uses: [String: Int] = [:]
        for (option, value) in options {
            uses[option, default: 0] += 1
            do throws(RuleError) {
                rules.append(try RuleParser.parse(option: option, index: uses[option]!, value: value))
            } catch {
                errors.append(error)
            }
        }
        errors += duplicateNames(rules)
        return errors.isEmpty ? .success(RuleSet(rules: rules)) : .failure(RuleSetError(errors: errors))
    }

    /// One line of a rules file: a rule, nil for a blank line or a comment, or an error.
    static func parse(line: String, source: RuleSource) throws(RuleError) -> Rule? {
        let chars = Array(line)
        var i = 0
        func skipSpaces() { while i < chars.count, chars[i] == " " || chars[i] == "\t" { i += 1 } }
        skipSpaces()
        guard i < chars.count, chars[i] != "#" else { return nil }
        var name: String?
        if chars[i] == "[" {
            let open = i
            guard let close = chars[open...].firstIndex(of: "]") else {
                throw RuleError(source: source, column: open + 1, message: "a [ with no ] closing the rule's name")
            }
            let text = String(chars[(open + 1)..<close])
            guard !text.isEmpty, text.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }) else {
                throw RuleError(
                    source: source, column: open + 2, message: "a rule's name is letters, digits, - _ and ., e.g. [mock-login]")
            }
            name = text
            i = close + 1
            skipSpaces()
        }
        let keywordStart = i
        while i < chars.count, chars[i] != " ", chars[i] != "\t" { i += 1 }
        let keyword = String(chars[keywordStart..<i])
        guard !keyword.isEmpty else {
            throw RuleError(source: source, column: keywordStart + 1, message: "expected a rule after the name")
        }
        skipSpaces()
        var end = chars.count
        while end > i, chars[end - 1] == " " || chars[end - 1] == "\t" { end -= 1 }
        let argument = String(chars[i..<max(i, end)])
        return try RuleParser.parse(keyword: keyword, argument: argument, name: name, source: source, column: i + 1)
    }

    private static func duplicateNames(_ rules: [Rule]) -> [RuleError] {
        var seen: [String: RuleSource] = [:]
        var errors: [RuleError] = []
        for rule in rules {
            guard let name = rule.name else { continue }
            if let first = seen[name] {
                errors.append(RuleError(source: rule.source, column: 1, message: "the name [\(name)] is taken by \(first)"))
            } else {
                seen[name] = rule.source
            }
        }
        return errors
    }
}

/// Why a rule set was refused: every bad rule, in order.
public struct RuleSetError: Error, Sendable, Equatable, CustomStringConvertible {
    public var errors: [RuleError]

    public init(errors: [RuleError]) { self.errors = errors }

    public var description: String { errors.map(\.description).joined(separator: "\n") }
}
