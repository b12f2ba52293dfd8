import ATSPolicy
import CaptureStore
import Foundation
import FuzzSupport
import ProxyTrace

// Input: a filter expression, as `show --filter`, `har --filter` and the web view's `q` parameter take it (the last
// from anyone who can reach the view). Every input must parse or give a FilterSyntaxError pointing inside it; every
// filter that parses must run against a capture (the SQL it compiles to is valid, whatever quotes, LIKE wildcards
// or bytes its values hold), its count must equal its listing, and it and its negation must split the capture
// exactly (NULL columns included).

/// A small capture with one exchange of each kind the filter words tell apart, made once per process in a scratch
/// folder removed at exit.
private let reader: CaptureReader = {
    let memory = URL(fileURLWithPath: "/dev/shm")
    let base = FileManager.default.isWritableFile(atPath: memory.path) ? memory : FileManager.default.temporaryDirectory
    let folder = base.appendingPathComponent("atsproxy-fuzz-filter-\(ProcessInfo.processInfo.processIdentifier)")
    let path = folder.appendingPathComponent("c.atscap").path
    do {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let writer = try CaptureWriter.open(
            path: path, run: CaptureRunInfo(started: 1, atsproxyVersion: "fuzz", bodyLimit: 0, settings: [:]))
        try writer.write(fixture)
        try writer.close(ended: 3)
        let reader = try CaptureReader(path: path)
        try FileManager.default.removeItem(at: folder)  // the open reader keeps the unlinked file
        return reader
    } catch {
        fatalError("cannot make the fuzz capture at \(path): \(error)")
    }
}()

private let total = 8

private var fixture: [CaptureItem] {
    func exchange(
        _ method: String, _ url: String, _ status: Int?, _ outcome: ExchangeSummary.ATSOutcome,
        errors: [ExchangeError] = [], interruption: String? = nil
    ) -> CaptureItem {
        var e = ExchangeSummary(
            method: method, url: url, status: status, httpVersion: "HTTP/1.1", outcome: outcome, errors: errors,
            requestBytes: 0, responseBytes: 0, durationMilliseconds: 1, interruption: interruption)
        e.detail = ExchangeDetail(timings: ExchangeTimings(started: 1, ended: 2))
        return .exchange(e)
    }
    let tls = ExchangeError(urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836))
    return [
        exchange("GET", "https://api.example.com/login?next=%2F&q=a_b", 200, .allowed),
        exchange("POST", "https://API.Example.com/login", 401, .allowed),
        exchange("CONNECT", "https://old.example.com", nil, .blocked, errors: [tls]),
        exchange("GET", "http://plain.test/'quoted\"/50%", 200, .violation, errors: [ExchangeError(urlError: URLErrorCode(-1022))]),
        exchange("GET", "https://cdn.example.com/a.js", 200, .allowed, interruption: "stream reset"),
        exchange("CONNECT", "https://pinned.test", nil, .notEvaluated),
        exchange("GET", "https://[::1]:8443/ünïcode\\path", 503, .failed),
        exchange("DELETE", "http://10.0.0.1:8080/x", 204, .allowed),
    ]
}

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
