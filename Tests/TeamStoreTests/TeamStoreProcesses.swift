import Foundation
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// The built `atsproxy`, and the processes the team store's tests run: proxies, a local origin, a load client.
enum TeamStoreBinary {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let path = root.appendingPathComponent(".build/debug/atsproxy").path

    /// `atsproxy ARGS…` to its end.
    static func run(_ arguments: [String], limit: Double = 120) throws -> CommandResult {
        try runCommand(path, arguments, limit: limit)
    }
}

/// A child process whose first lines of standard output carry a port; stderr goes to a file. Killed by pid when
/// the test lets go of it.
class PortProcess {
    let process = Process()
    let port: Int
    let stderrFile: URL

    /// Starts `executable arguments` and reads stdout (at most 10 s) until `port` finds the port in a line.
    init(_ executable: String, _ arguments: [String], folder: URL, port: (Substring) -> Int?) throws {
        stderrFile = folder.appendingPathComponent("stderr-\(UUID().uuidString.prefix(6))")
        guard FileManager.default.createFile(atPath: stderrFile.path, contents: nil) else {
            throw PostgresTestError("cannot create \(stderrFile.path)")
        }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        // Console lines (the proxies run --quiet) are few: the pipe never fills.
        self.port = try launchAndReadPort(process, stderr: try FileHandle(forWritingTo: stderrFile), port: port) { text in
            PostgresTestError("\(executable) did not start: \(text)")
        }
    }

    var stderr: String {
        do { return try String(contentsOf: stderrFile, encoding: .utf8) } catch { return "(stderr unreadable: \(error))" }
    }

    /// Sends `signal` and waits at most `limit` seconds for the exit; SIGKILL after that. Returns the exit status.
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM, limit: Double = 20) -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(limit)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit { stop(SIGKILL, limit: 5) }
}

/// `atsproxy run` on a free port of 127.0.0.1.
final class ProxyProcess: PortProcess {
    init(_ arguments: [String], folder: URL) throws {
        try super.init(
            TeamStoreBinary.path,
            ["run", "--listen", "127.0.0.1:0", "--ca-dir", folder.appendingPathComponent("ca").path, "--quiet"]
                + arguments,
            folder: folder
        ) { line in
            guard line.hasPrefix("ATSProxy listening on 127.0.0.1:") else { return nil }
            return Int(line.dropFirst("ATSProxy listening on 127.0.0.1:".count).prefix { $0.isNumber })
        }
    }
}

/// A keep-alive HTTP/1.1 origin on 127.0.0.1 answering every GET with 200 and a small body naming the path.
final class OriginProcess: PortProcess {
    static let script = TeamStoreBinary.root
        .appendingPathComponent("Tests/TeamStoreTests/Scripts/keepalive_origin.py").path

    init(folder: URL) throws {
        try super.init("/usr/bin/python3", [Self.script], folder: folder) { line in
            line.hasPrefix("PORT ") ? Int(line.dropFirst(5)) : nil
        }
    }
}

/// Sends `count` GETs through a proxy over `connections` keep-alive connections (Python's http.client), each with
/// a 10 s timeout. Returns the requests answered with 200 and the slowest request's seconds.
func drive(proxy: Int, origin: Int, count: Int, connections: Int = 4, tag: String) throws -> (ok: Int, slowest: Double) {
    let script = TeamStoreBinary.root.appendingPathComponent("Tests/TeamStoreTests/Scripts/keepalive_driver.py")
        .path
    let result = try runCommand(
        "/usr/bin/python3", [script, String(proxy), String(origin), String(count), String(connections), tag],
        limit: 120)
    let fields = result.stdoutText.split(separator: " ")
    guard result.status == 0, fields.count == 2, let ok = Int(fields[0]),
        let slowest = Double(fields[1].trimmingCharacters(in: .whitespacesAndNewlines))
    else {
        throw PostgresTestError("load client: \(result.stdoutText) \(result.stderrText)")
    }
    return (ok, slowest)
}

/// Waits (at most `limit` seconds, polling every 100 ms) for `condition`; returns whether it held.
func eventually(limit: Double = 20, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(limit)
    while Date() < deadline {
        if try condition() { return true }
        usleep(100_000)
    }
    return try condition()
}
