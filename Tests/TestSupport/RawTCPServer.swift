import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP server on 127.0.0.1 (or ::1) that does not speak TLS, for testing how clients report such peers. It is a
/// small Python script on a kernel-chosen port, killed by pid when released; it also exits when its stdin closes,
/// so it never outlives the test process.
public final class RawTCPServer {
    /// What the server does with each connection.
    public enum Behaviour: String, Sendable {
        /// Answers the first bytes with a plain `HTTP/1.0 400` response and closes (as `python3 -m http.server`).
        case http
        /// Accepts and reads, never answers, keeps the connection open.
        case silent
        /// Accepts and closes at once.
        case close
        /// Answers the first bytes with a TLS record header, then sends one byte of its body every 0.25 s: each
        /// read gets data in time, but the record never completes.
        case trickle
    }

    /// The Python process, killed by pid on deinit.
    public let process = Process()
    /// The port the server listens on.
    public let port: Int

    /// `Tests/TestSupport/Scripts/raw_tcp_server.py` (found from the package root, so it runs in place).
    private static let script = TestPython.packageRoot
        .appendingPathComponent("Tests/TestSupport/Scripts/raw_tcp_server.py").path

    /// Starts the server on `host` (`127.0.0.1` or `::1`); waits at most 10 seconds for it to listen.
    public init(_ behaviour: Behaviour, host: String = "127.0.0.1") throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", RawTCPServer.script, behaviour.rawValue, host]
        // The script prints "PORT N" once listening (and exits at EOF on stdin).
        port = try launchAndReadPort(process) { line in
            line.hasPrefix("PORT ") ? Int(line.dropFirst(5).trimmingCharacters(in: .whitespaces)) : nil
        } failure: { RawTCPServerError(message: "the raw TCP server did not start: \($0)") }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// The raw TCP server failed to start.
public struct RawTCPServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
