import FilterCore

// Theory of operation:
//
// One parser for both spellings of a rule: a CLI option (`--map-local SPEC`) and a rules-file line
// (`map-local SPEC`) both come here as a keyword and its argument, with the argument's column in its line.
//
// Actions in mitmproxy's syntax (`map-local`, `modify-headers`, `modify-body`) take a separator-delimited spec,
// `[/filter]/subject/replacement`, read as mitmproxy's `parse_spec` reads it: the first character is the
// separator; the rest is split at it into at most three clauses, extra separators belonging to the last; two
// clauses mean no filter. Our filter language stands where mitmproxy takes a flow filter. `answer` splits at every
// separator (`[/filter]/STATUS[/Name: value…]/BODY`); `fault`, `block` and `throttle` take a host pattern.
// Then each rule's points follow from its action and filter, and a filter on a field its point cannot know is
// refused here, with its column.

/// Reads one rule. Stateless; see the theory of operation above.
public enum RuleParser {
    /// The keywords of rules files, each also a CLI option (`--map-local`).
    public static let keywords = ["map-local", "modify-headers", "modify-body", "answer", "block", "fault", "throttle",
        "breakpoint",
    ]

    /// Separator candidates, in order of preference, when a rule is written back (`Rule.text`).
    static let separators: [Character] = ["/", "|", "!", "#", "~", "%", ";", ",", "^", "=", "+", "&"]

    /// A rule from a keyword (`modify-headers`, optionally `:request` or `:response` for the modify actions) and
    /// its argument. `column` is the argument's first column in its line, so errors point into the line.
    public static func parse(
        keyword: String, argument: String, name: String? = nil, source: RuleSource, column: Int = 1
    ) throws(RuleError) -> Rule {
        var reader = Reader(source: source, base: column)
        return try reader.rule(keyword: keyword, argument: argument, name: name)
    }

    /// A rule from a CLI option: `option` is its name as typed (`--fault`), `index` its 1-based use.
    public static func parse(option: String, index: Int, value: String) throws(RuleError) -> Rule {
        var keyword = option.hasPrefix("--") ? String(option.dropFirst(2)) : option
        // `run --block` was taken (how enforce blocks): the option is mitmproxy's `--block-list`.
        if keyword == "block-list" { keyword = "block" }
        return try parse(keyword: keyword, argument: value, source: .option(option, index: index))
    }
}

/// A clause of a separator-delimited spec and its column.
struct Clause {
    var text: String
    var column: Int
}

private struct Reader {
    let source: RuleSource
    /// The column of the argument's first character.
    let base: Int

    func error(_ column: Int, _ message: String) -> RuleError {
        RuleError(source: source, column: column, message: message)
    }

    mutating func rule(keyword rawKeyword: String, argument: String, name: String?) throws(RuleError) -> Rule {
        let parts = rawKeyword.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let keyword = parts[0].lowercased()
        let qualifier = parts.count > 1 ? parts[1].lowercased() : nil
        // The keyword's column, for messages about it: just before the argument in a file line.
        let keywordColumn = max(1, base - rawKeyword.count - 1)
        guard RuleParser.keywords.contains(keyword) else {
            throw error(
                keywordColumn,
                "unknown rule \"\(rawKeyword)\"; expected one of " + RuleParser.keywords.joined(separator: ", "))
        }
        if let qualifier {
            guard keyword == "modify-headers" || keyword == "modify-body" || keyword == "breakpoint" else {
                throw error(keywordColumn, "only modify-headers, modify-body and breakpoint take :request or :response")
            }
            guard qualifier == "request" || qualifier == "response" else {
                throw error(keywordColumn, "\"\(qualifier)\" is not a point; expected \(keyword):request or \(keyword):response")
            }
        }
        guard !argument.isEmpty else { throw error(base, "expected an argument after \(keyword)") }
        let (filter, filterClause, action, defaultPoints): (FilterCondition?, Clause?, RuleAction, [RulePoint])
        switch keyword {
        case "map-local":
            let (f, clauses) = try spec(argument, of: keyword, subjects: "URL-REGEX/PATH")
            try checkRegex(clauses[0], what: "URL regex")
            guard !clauses[1].text.isEmpty else { throw error(clauses[1].column, "expected a file or directory path") }
            (filter, filterClause, action) = (f?.0, f?.1, .mapLocal(urlRegex: clauses[0].text, path: clauses[1].text))
            defaultPoints = [.requestHead]
        case "modify-headers":
            let (f, clauses) = try spec(argument, of: keyword, subjects: "NAME/VALUE")
            try checkHeaderName(clauses[0])
            let value = clauses[1].text.isEmpty ? nil : RuleText(parsing: clauses[1].text)
            if case .literal(let v) = value, v.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
                throw error(clauses[1].column, "a header value cannot hold a line break or NUL")
            }
            (filter, filterClause, action) = (f?.0, f?.1, .modifyHeaders(name: clauses[0].text, value: value))
            defaultPoints = try modifyPoints(qualifier, filter: filter, head: true)
        case "modify-body":
            let (f, clauses) = try spec(argument, of: keyword, subjects: "REGEX/REPLACEMENT")
            try checkRegex(clauses[0], what: "regex")
            (filter, filterClause, action) = (
                f?.0, f?.1, .modifyBody(regex: clauses[0].text, replacement: RuleText(parsing: clauses[1].text))
            )
            defaultPoints = try modifyPoints(qualifier, filter: filter, head: false)
        case "answer":
            let (f, a) = try answer(argument)
            (filter, filterClause, action, defaultPoints) = (f?.0, f?.1, a, [.requestHead])
        case "fault":
            let (f, kindClause) = try target(argument, of: keyword, kindRequired: true)
            guard let kind = FaultKind(spelling: kindClause.text) else {
                throw error(
                    kindClause.column,
                    "unknown fault kind \"\(kindClause.text)\"; expected one of "
                        + FaultKind.named.map(\.description).joined(separator: ", ") + ", status:NNN")
            }
            (filter, filterClause, action, defaultPoints) = (f?.0, f?.1, .fault(kind), [kind.point])
        case "block":
            let (f, kindClause) = try target(argument, of: keyword, kindRequired: false)
            let kind: BlockKind
            if kindClause.text.isEmpty {
                kind = .reset
            } else if let k = BlockKind(rawValue: kindClause.text.lowercased()) {
                kind = k
            } else {
                throw error(
                    kindClause.column,
                    "unknown block kind \"\(kindClause.text)\"; expected "
                        + BlockKind.allCases.map(\.rawValue).joined(separator: " or "))
            }
            // A host is known before the upstream is contacted; a method or URL only with the request.
            let point: RulePoint = (f?.0.earliestPoint ?? .connection) <= .connection ? .connection : .requestHead
            (filter, filterClause, action, defaultPoints) = (f?.0, f?.1, .block(kind), [point])
        case "breakpoint":
            let (f, points) = try breakpoint(argument, qualifier: qualifier)
            (filter, filterClause, action, defaultPoints) = (f?.0, f?.1, .breakpoint, points)
        default:  // throttle
            let (f, reference) = try throttle(argument)
            (filter, filterClause, action, defaultPoints) = (f?.0, f?.1, .throttle(reference), [.connection])
        }
        if let filter, let filterClause, let first = defaultPoints.first {
            try checkKnown(filter, filterClause, at: first, keyword: keyword)
        }
        return Rule(name: name, filter: filter, points: defaultPoints, action: action, source: source)
    }

    /// A filter reading a field `point` does not know: an error at the field's first use.
    func checkKnown(_ filter: FilterCondition, _ clause: Clause, at point: RulePoint, keyword: String) throws(RuleError) {
        guard let key = filter.unknownKeys(at: point.filterPoint).first else { return }
        let lowered = clause.text.lowercased()
        let offset = lowered.firstRange(of: key).map { lowered.distance(from: lowered.startIndex, to: $0.lowerBound) }
        let known = FilterCondition.earliestPoint(knowing: key).map { "is known only from the \($0) point on" }
            ?? "is a capture's field, not known on a live exchange"
        let keyText = key == "problems" ? "problems" : key + ":"
        // Lowercasing may change a string's length in characters: the column stays inside the clause.
        throw error(
            clause.column + min(offset ?? 0, clause.text.count),
            "\(keyText) \(known); a \(keyword) rule acts at the \(point) point, so it would never match")
    }

    /// Points of a modify rule: both heads (or bodies) as in mitmproxy, unless the filter reads a response field
    /// (then the response's) or the keyword says which.
    func modifyPoints(_ qualifier: String?, filter: FilterCondition?, head: Bool) throws(RuleError) -> [RulePoint] {
        let request: RulePoint = head ? .requestHead : .requestBody
        let response: RulePoint = head ? .responseHead : .responseBody
        switch qualifier {
        case "request": return [request]
        case "response": return [response]
        default:
            guard let filter else { return [request, response] }
            return (filter.earliestPoint ?? .response) <= .request ? [request, response] : [response]
        }
    }

    /// `[request:|response:]FILTER` (or `*`: every exchange): with no prefix (nor `:request`/`:response` on the
    /// keyword) the breakpoint holds both the request and the response, as Charles and Proxyman do, unless the
    /// filter reads a response field (then the response alone).
    func breakpoint(_ argument: String, qualifier: String?) throws(RuleError) -> ((FilterCondition, Clause)?, [RulePoint]) {
        var text = Substring(argument)
        var column = base
        var phase = qualifier
        for prefix in ["request:", "response:"] where text.lowercased().hasPrefix(prefix) {
            if phase != nil {
                throw error(base, "the breakpoint's phase is given twice (breakpoint:PHASE and \(prefix))")
            }
            phase = String(prefix.dropLast())
            text = text.dropFirst(prefix.count)
            column += prefix.count
        }
        let filterText = String(text).trimmingSpaces
        guard !filterText.isEmpty else {
            throw error(column, "expected a filter after the phase (breakpoint [request:|response:]FILTER, or * for all)")
        }
        let filter: (FilterCondition, Clause)?
        if filterText == "*" {
            filter = nil
        } else {
            let clause = Clause(text: String(text), column: column)
            filter = (try self.filter(clause), clause)
        }
        let points: [RulePoint]
        switch phase {
        case "request": points = [.requestHead]
        case "response": points = [.responseHead]
        default:
            let earliest = filter?.0.earliestPoint ?? .request
            points = earliest <= .request ? [.requestHead, .responseHead] : [.responseHead]
        }
        return (filter, points)
    }

    /// Splits mitmproxy's `[/filter]/subject/replacement` and parses the filter.
    func spec(
        _ argument: String, of keyword: String, subjects: String
    ) throws(RuleError) -> ((FilterCondition, Clause)?, [Clause]) {
        let clauses = try split(argument, maxClauses: 3, usage: "\(keyword) [/FILTER]/\(subjects)")
        guard clauses.count >= 2 else {
            throw error(base + argument.count, "expected \(keyword) [/FILTER]/\(subjects): 2 or 3 clauses, found 1")
        }
        if clauses.count == 2 { return (nil, clauses) }
        return ((try filter(clauses[0]), clauses[0]), Array(clauses[1...]))
    }

    /// The clauses of a separator-delimited argument: the first character is the separator (punctuation: a
    /// letter, digit or space would make the rule unreadable); at most `maxClauses`, extra separators belonging
    /// to the last.
    func split(_ argument: String, maxClauses: Int, usage: String) throws(RuleError) -> [Clause] {
        guard let separator = argument.first else { throw error(base, "expected \(usage)") }
        // ASCII punctuation only: a combining mark would fuse with the space before it into one character.
        guard separator.isASCII, separator.isPunctuation || separator.isSymbol, separator != "\"", separator != "@"
        else {
            throw error(
                base, "expected a separator character such as / or | before the first clause (\(usage)), not \"\(separator)\"")
        }
        var clauses: [Clause] = []
        var current = ""
        var column = base + 1
        var start = column
        for c in argument.dropFirst() {
            if c == separator, clauses.count < maxClauses - 1 {
                clauses.append(Clause(text: current, column: start))
                current = ""
                start = column + 1
            } else {
                current.append(c)
            }
            column += 1
        }
        clauses.append(Clause(text: current, column: start))
        return clauses
    }

    func filter(_ clause: Clause) throws(RuleError) -> FilterCondition {
        do {
            return try FilterCondition(parsing: clause.text)
        } catch {
            throw self.error(clause.column + error.column - 1, "in the filter: " + error.message)
        }
    }

    func checkRegex(_ clause: Clause, what: String) throws(RuleError) {
        guard !clause.text.isEmpty else { throw error(clause.column, "expected a \(what)") }
        do {
            _ = try Regex(clause.text)
        } catch {
            throw self.error(clause.column, "\"\(clause.text)\" is not a valid \(what): \(error)")
        }
    }

    func checkHeaderName(_ clause: Clause) throws(RuleError) {
        guard !clause.text.isEmpty else { throw error(clause.column, "expected a header name") }
        // RFC 9110's token characters.
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        if let bad = clause.text.firstIndex(where: { !token.contains($0) }) {
            throw error(
                clause.column + clause.text.distance(from: clause.text.startIndex, to: bad),
                "\"\(clause.text)\" is not a header name (a token: letters, digits and !#$%&'*+-.^_`|~)")
        }
    }

    /// `[/filter]/STATUS[/Name: value…]/BODY`: every separator splits; the last clause is the body.
    func answer(_ argument: String) throws(RuleError) -> ((FilterCondition, Clause)?, RuleAction) {
        let usage = "answer [/FILTER]/STATUS[/NAME: VALUE…]/BODY"
        var clauses = try split(argument, maxClauses: .max, usage: usage)
        var filter: (FilterCondition, Clause)?
        if let first = clauses.first, !Self.isStatus(first.text) {
            filter = (try self.filter(first), first)
            clauses.removeFirst()
        }
        guard let statusClause = clauses.first, let status = Int(statusClause.text), Self.isStatus(statusClause.text)
        else {
            let column = clauses.first?.column ?? base + argument.count
            throw error(column, "expected a status from 100 to 599 (\(usage))")
        }
        guard clauses.count >= 2, let bodyClause = clauses.last else {
            throw error(base + argument.count, "expected a body after the status, empty or @FILE (\(usage))")
        }
        var headers: [RuleHeader] = []
        for clause in clauses.dropFirst().dropLast() {
            guard let colon = clause.text.firstIndex(of: ":") else {
                throw error(clause.column, "expected a header NAME: VALUE (the body is the last clause)")
            }
            let name = String(clause.text[..<colon])
            try checkHeaderName(Clause(text: name, column: clause.column))
            let value = clause.text[clause.text.index(after: colon)...].trimmingSpaces
            if value.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
                throw error(clause.column, "a header value cannot hold a line break or NUL")
            }
            headers.append(RuleHeader(name: name, value: value))
        }
        return (filter, .answer(status: status, headers: headers, body: RuleText(parsing: bodyClause.text)))
    }

    static func isStatus(_ text: String) -> Bool {
        text.count == 3 && text.allSatisfy { $0.isASCII && $0.isNumber } && (100...599).contains(Int(text) ?? 0)
    }

    /// `HOST-PATTERN=KIND` (or `HOST-PATTERN` when the kind is optional), or `/FILTER/KIND` with any separator.
    func target(
        _ argument: String, of keyword: String, kindRequired: Bool
    ) throws(RuleError) -> ((FilterCondition, Clause)?, Clause) {
        let kindUsage = kindRequired ? "=KIND" : "[=KIND]"
        guard let first = argument.first, first.isLetter || first.isNumber || first == "*" || first == "." else {
            let clauses = try split(argument, maxClauses: 2, usage: "\(keyword) HOST-PATTERN\(kindUsage) or /FILTER/KIND")
            let kind = clauses.count > 1 ? clauses[1] : Clause(text: "", column: base + argument.count)
            if kindRequired, kind.text.isEmpty {
                throw error(kind.column, "expected a \(keyword) kind after the filter: \(keyword) /FILTER/KIND")
            }
            return ((try filter(clauses[0]), clauses[0]), kind)
        }
        let equals = argument.firstIndex(of: "=")
        let patternText = String(argument[..<(equals ?? argument.endIndex)])
        let kind =
            equals.map { Clause(text: String(argument[argument.index(after: $0)...]), column: base + patternText.count + 1) }
            ?? Clause(text: "", column: base + argument.count)
        if kindRequired, equals == nil {
            throw error(base + argument.count, "expected =KIND after the host pattern: \(keyword) HOST-PATTERN=KIND")
        }
        let pattern = try hostPattern(Clause(text: patternText, column: base))
        return (pattern.map { ($0, Clause(text: "host:", column: base)) }, kind)
    }

    /// `*` (every host: no filter), `*.example.com` (the domain and below), `api.example.com`, an IP address.
    func hostPattern(_ clause: Clause) throws(RuleError) -> FilterCondition? {
        let text = clause.text.lowercased()
        if text == "*" { return nil }
        let name = text.hasPrefix("*.") ? String(text.dropFirst(2)) : text.hasPrefix(".") ? String(text.dropFirst()) : text
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-.:[]_")
        guard !name.isEmpty, !name.hasPrefix("."), !name.hasSuffix(".."), !name.contains("..") else {
            throw error(clause.column, "\"\(clause.text)\" is not a host pattern; expected *, api.example.com or *.example.com")
        }
        if let bad = name.firstIndex(where: { !allowed.contains($0) }) {
            let offset = text.count - name.count + name.distance(from: name.startIndex, to: bad)
            throw error(
                clause.column + min(offset, clause.text.count),
                "\"\(clause.text)\" is not a host pattern (a * may only lead, as in *.example.com)")
        }
        return .host(text.hasPrefix("*.") || text.hasPrefix(".") ? "." + name : name)
    }

    /// `PROFILE[@HOST-PATTERN]`: a profile name, or `down=…,up=…,latency=…,loss=…`.
    func throttle(_ argument: String) throws(RuleError) -> ((FilterCondition, Clause)?, ThrottleReference) {
        let at = argument.lastIndex(of: "@")
        let profile = String(argument[..<(at ?? argument.endIndex)]).trimmingSpaces
        var filter: (FilterCondition, Clause)?
        if let at {
            let patternText = String(argument[argument.index(after: at)...])
            let clause = Clause(text: patternText, column: base + argument.distance(from: argument.startIndex, to: at) + 1)
            filter = try hostPattern(clause).map { ($0, Clause(text: "host:", column: clause.column)) }
        }
        guard !profile.isEmpty else {
            throw error(base, "expected a profile (3G, LTE, Very Bad Network, …) or down=…,up=…,latency=…,loss=…")
        }
        // `@` ends the profile: a name holding one would read differently once written back without its pattern.
        if let at = profile.firstIndex(of: "@") {
            throw error(base + profile.distance(from: profile.startIndex, to: at), "a profile cannot hold a second @")
        }
        // A letter or digit first (3G, LTE, Wi-Fi, 100% Loss, down=…): a combining mark would fuse with the space
        // before it in a rules file's line.
        guard let first = profile.first, first.isASCII, first.isLetter || first.isNumber else {
            throw error(base, "a profile starts with a letter or digit: 3G, LTE, Very Bad Network, down=…")
        }
        guard profile.contains("=") else { return (filter, .profile(profile)) }
        var pairs: [(key: String, value: String)] = []
        var column = base
        for item in profile.split(separator: ",", omittingEmptySubsequences: false) {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = pair[0].trimmingSpaces.lowercased()
            guard ThrottleReference.customKeys.contains(key) else {
                throw error(
                    column, "\"\(pair[0])\" is not a throttle key; expected " + ThrottleReference.customKeys.joined(separator: ", "))
            }
            guard !pairs.contains(where: { $0.key == key }) else { throw error(column, "\(key) given twice") }
            guard pair.count == 2, !pair[1].trimmingSpaces.isEmpty else { throw error(column, "expected a value: \(key)=…") }
            pairs.append((key, pair[1].trimmingSpaces))
            column += item.count + 1
        }
        return (filter, .custom(pairs))
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        guard let first = firstIndex(where: { $0 != " " && $0 != "\t" }),
            let last = lastIndex(where: { $0 != " " && $0 != "\t" })
        else { return "" }
        return String(self[first...last])
    }
}
