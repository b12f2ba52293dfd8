import FilterCore
import FuzzSupport
import TrafficRules

// Input: a rules file (`--rules`, `atsproxy rules FILE --check`), and each of its lines as the value of every CLI
// option. Every input must parse or give errors that each point inside their line (1 ≤ column ≤ length + 1) and
// name a line of the file; a file either yields all its rules or none. Every rule must be written back
// (`Rule.text`) to text that reads to the same rule, unless no separator is free for its clauses.

/// One input; see above.
func fuzzRules(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: count), as: UTF8.self)
    let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" })
    switch RuleSet.parse(file: text, path: "f") {
    case .success(let set):
        for rule in set.rules { checkRoundTrip(rule) }
    case .failure(let error):
        invariant(!error.errors.isEmpty, "a refused file with no errors")
        for e in error.errors {
            guard case .file(_, let line) = e.source else {
                invariant(false, "a file's error from \(e.source)")
                continue
            }
            invariant(line >= 1 && line <= lines.count, "line \(line) of \(lines.count)")
            invariant(e.column >= 1 && e.column <= lines[line - 1].count + 1, "column \(e.column) of \(String(reflecting: String(lines[line - 1])))")
            _ = e.description
        }
    }
    // Each line as an option's value, for each option.
    for line in lines.prefix(4) {
        for keyword in RuleParser.keywords {
            let value = String(line)
            do throws(RuleError) {
                checkRoundTrip(try RuleParser.parse(option: "--" + keyword, index: 1, value: value))
            } catch {
                invariant(error.column >= 1 && error.column <= value.count + 1, "column \(error.column) of \(String(reflecting: value))")
            }
        }
    }
    return 0
}

private func checkRoundTrip(_ rule: Rule) {
    let text = rule.text
    // A file line's trailing spaces and line breaks are not part of it: an option's value ending so cannot be
    // written as a line (docs/rules-rules.md; a regression test holds the two readings).
    if text.last?.isWhitespace == true || text.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\r\n" }) { return }
    do throws(RuleError) {
        guard let again = try RuleParserLine.parse(text) else {
            invariant(false, "\(String(reflecting: text)) reads as no rule")
            return
        }
        invariant(
            again.filter == rule.filter && again.action == rule.action && again.points == rule.points
                && again.name == rule.name,
            "\(String(reflecting: text)) reads as another rule")
    } catch {
        // Only a rule none of whose separators is free may not read back.
        invariant(text.contains("/") && text.contains("|") && text.contains("!"), "\(String(reflecting: text)): \(error)")
    }
}

/// A line read alone, through the file parser.
enum RuleParserLine {
    static func parse(_ line: String) throws(RuleError) -> Rule? {
        switch RuleSet.parse(file: line, path: "again") {
        case .success(let set): return set.rules.first
        case .failure(let error): throw error.errors[0]
        }
    }
}
