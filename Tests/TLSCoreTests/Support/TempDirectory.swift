import Foundation
import TestSupport

/// A folder under the system temp directory, removed when the value is deinitialised.
final class TempDirectory: Sendable {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("tlscore-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: url) }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

/// Runs the `openssl` CLI to completion and returns its stdout; throws with stderr when it fails.
@discardableResult
func runOpenSSL(_ arguments: [String], input: String? = nil) throws -> String {
    let run = try runCommand("openssl", arguments, input: input.map { Data($0.utf8) })
    guard run.status == 0 else {
        throw CLIError(message: "openssl \(arguments.joined(separator: " ")): " + run.stderrText)
    }
    return run.stdoutText
}

struct CLIError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
