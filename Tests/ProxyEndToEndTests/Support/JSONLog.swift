import Foundation

/// The `--log-json` events in `log`, read as plain JSON objects (not through the proxy's Swift types), waiting
/// (bounded) until `done` holds for them. Every complete line must be a JSON object; the last line is left out
/// while it may still be being written.
func jsonEvents(_ log: URL, until done: ([[String: Any]]) -> Bool) async throws -> [[String: Any]] {
    let deadline = ContinuousClock.now + .seconds(10)
    var found: [[String: Any]] = []
    while ContinuousClock.now < deadline {
        let text = FileManager.default.fileExists(atPath: log.path) ? try String(contentsOf: log, encoding: .utf8) : ""
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        found = try lines.map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw HarnessError("not a JSON object: \(line)")
            }
            return object
        }
        if done(found) { return found }
        try await Task.sleep(for: .milliseconds(50))
    }
    throw HarnessError("\(log.lastPathComponent) never held the events expected: \(found)")
}

/// The `--log-json` events of `kind`, waiting (bounded) until there are at least `count`.
func jsonEvents(_ log: URL, kind: String, count: Int) async throws -> [[String: Any]] {
    try await jsonEvents(log) { $0.filter { $0["kind"] as? String == kind }.count >= count }
        .filter { $0["kind"] as? String == kind }
}
