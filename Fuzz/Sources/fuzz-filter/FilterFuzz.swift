import CaptureStore
import Foundation
import FuzzCapture
import FuzzSupport

// Input: a filter expression, as `show --filter`, `har --filter` and the web view's `q` parameter take it (the last
// from anyone who can reach the view). Every input must parse or give a FilterSyntaxError pointing inside it; every
// filter that parses must run against a capture (the SQL it compiles to is valid, whatever quotes, LIKE wildcards
// or bytes its values hold), its count must equal its listing, and it and its negation must split the capture
// exactly (NULL columns included).

private let reader = FuzzCapture.reader
private let total = FuzzCapture.total

/// One input; see above.
func fuzzFilter(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let expression = String(decoding: UnsafeBufferPointer(start: data, count: count), as: UTF8.self)
    guard let filter = parse(expression) else { return 0 }
    let matching = run(filter, expression)
    // The negation: `not ( … )`, when the input still parses so wrapped (it may not: an unbalanced parenthesis
    // inside a quoted value is fine alone, or the nesting bound is reached).
    if let negated = parse("not (\(expression) )") {
        let others = run(negated, "not (…)")
        invariant(
            matching + others == total,
            "\(matching) exchanges match \(String(reflecting: expression)) and \(others) its negation, of \(total)")
    }
    return 0
}

private func parse(_ expression: String) -> CaptureFilter? {
    do {
        return try CaptureFilter(parsing: expression)
    } catch {
        invariant(
            error.column >= 1 && error.column <= expression.count + 1,
            "column \(error.column) of an expression of \(expression.count) characters")
        _ = error.description
        return nil
    }
}

/// The filter's count, checked against its listing.
private func run(_ filter: CaptureFilter, _ expression: String) -> Int {
    do {
        let count = try reader.count(matching: filter)
        let listed = try reader.exchanges(matching: filter, limit: total + 1).count
        let summarized = try reader.summaries(matching: filter, limit: total + 1).count
        invariant(
            count == listed && listed == summarized,
            "\(String(reflecting: expression)): count \(count), listing \(listed), summaries \(summarized)")
        return count
    } catch {
        invariant(false, "\(String(reflecting: expression)) parsed but did not run: \(error)")
        return 0
    }
}
