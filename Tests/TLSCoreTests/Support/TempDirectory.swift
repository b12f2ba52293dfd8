import Foundation

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
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl"] + arguments
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let inPipe = Pipe()
    process.standardInput = inPipe
    try process.run()
    if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
    try inPipe.fileHandleForWriting.close()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
        throw CLIError(message: "openssl \(arguments.joined(separator: " ")): " + String(decoding: stderr, as: UTF8.self))
    }
    return String(decoding: stdout, as: UTF8.self)
}

struct CLIError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
