import Foundation

/// The python of the test virtualenv (`scripts/pyvenv`: mitmproxy, haralyzer, jsonschema, Selenium from PyPI), for
/// tests whose real consumer or client is a PyPI package. Created on first use, so a plain `swift test` works too.
public enum TestPython {
    /// The package's root folder, found from this file's place in it.
    public static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The virtualenv's python, or an error saying why `scripts/pyvenv` could not make it.
    public static func path() throws -> String {
        try cached.withLock { cached in
            if let path = cached { return path }
            let process = Process()
            process.executableURL = packageRoot.appendingPathComponent("scripts/pyvenv")
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let path = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard process.terminationStatus == 0, !path.isEmpty else {
                throw SetupError(message: "scripts/pyvenv failed (exit \(process.terminationStatus))")
            }
            cached = path
            return path
        }
    }

    public struct SetupError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    private static let cached = NSLockedBox<String?>(nil)
}

/// A value behind an NSLock (XCTest and Swift Testing may run tests on several threads).
final class NSLockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
