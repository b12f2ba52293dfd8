import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A failure of the test harness itself (a helper that did not start, a wait that timed out), with what it saw.
struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A child process whose stdout and stderr go to files in the test's folder, stopped by pid when released.
final class TestProcess: @unchecked Sendable {
    // @unchecked: `process` is only started in init and signalled by pid; the output is re-read from files.
    let process: Process
    let name: String
    let stdoutURL: URL
    let stderrURL: URL

    /// Starts `executable` with `arguments`; `environment` entries are added to the test's own environment.
    init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], in folder: URL,
        name: String? = nil
    ) throws {
        let label = name ?? URL(fileURLWithPath: executable).lastPathComponent
        let tag = "\(label)-\(UUID().uuidString.prefix(8))"
        self.name = label
        stdoutURL = folder.appendingPathComponent("\(tag).out")
        stderrURL = folder.appendingPathComponent("\(tag).err")
        for url in [stdoutURL, stderrURL] where !FileManager.default.createFile(atPath: url.path, contents: nil) {
            throw HarnessError("cannot create \(url.path)")
        }
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.currentDirectoryURL = folder
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        process.standardInput = FileHandle.nullDevice
        let output = try FileHandle(forWritingTo: stdoutURL)
        let errors = try FileHandle(forWritingTo: stderrURL)
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // The child has its own copies; ours would stay open as long as the Process, and a test run that holds
        // over about 1,360 descriptors meets Foundation's Process.run over-read of /proc/self/fd (it crashed CI:
        // swift-corelibs-foundation#5472, fixed after Swift 6.3.1). The output is read back from the files.
        try output.close()
        try errors.close()
    }

    deinit { stop() }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    var stdout: String { (try? String(contentsOf: stdoutURL, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOf: stderrURL, encoding: .utf8)) ?? "" }

    /// The first complete line of stdout (stderr with `stderr: true`) that starts with `prefix`, waiting for it as
    /// `waitForOutput` does. A line still being written (no newline yet) is not taken.
    func waitForLine(
        startingWith prefix: String, stderr useStderr: Bool = false, timeout: Duration = .seconds(20)
    ) async throws -> String {
        try await waitForOutput(stderr: useStderr, timeout: timeout) { text in
            text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                .first { $0.hasPrefix(prefix) }.map(String.init)
        }
    }

    /// Waits until `stdout` (or `stderr`) satisfies `match`, returning its value; fails if the process exits first.
    func waitForOutput<T>(
        stderr useStderr: Bool = false, timeout: Duration = .seconds(20), _ match: (String) -> T?
    ) async throws -> T {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let text = useStderr ? stderr : stdout
            if let found = match(text) { return found }
            if !isRunning {
                if let found = match(useStderr ? stderr : stdout) { return found }
                throw HarnessError("\(name) exited (\(process.terminationStatus)) before the expected output.\n"
                    + "stdout: \(stdout.suffix(2000))\nstderr: \(self.stderr.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        // One last look: a busy machine can resume this task only after the deadline.
        if let found = match(useStderr ? stderr : stdout) { return found }
        throw HarnessError("\(name): expected output did not appear within \(timeout).\n"
            + "stdout: \(stdout.suffix(2000))\nstderr: \(stderr.suffix(2000))")
    }

    /// Waits for the process to exit by itself; kills it and fails after `timeout`.
    @discardableResult
    func waitForExit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while isRunning {
            if ContinuousClock.now >= deadline, isRunning {
                stop()
                throw HarnessError("\(name) did not finish within \(timeout).\nstderr: \(stderr.suffix(2000))")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        return process.terminationStatus
    }

    /// Ends the process at once (SIGKILL) and waits, bounded, for Foundation to see it gone.
    ///
    /// This used to send SIGTERM and wait up to a second, which nghttpd ignores and atsproxy answers with a graceful
    /// drain: each stop held one of the few cooperative threads the parallel tests share for a second, and the
    /// others' polls ran past their deadlines. `Process.waitUntilExit` is not used: called from deinits on the
    /// cooperative threads while the test runner's main thread exits, it never returned (seen in a clean-clone run).
    func stop() {
        guard process.isRunning else { return }
        kill(pid, SIGKILL)
        // SIGKILL is not deferrable: Foundation notices within milliseconds; two seconds bound the wait.
        for _ in 0..<2000 where process.isRunning { usleep(1000) }
    }
}

/// The result of a process run to completion.
struct ProcessResult: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs a process to completion (bounded by `timeout`) and returns its exit status and output.
func runProcess(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:], in folder: URL,
    timeout: Duration = .seconds(60)
) async throws -> ProcessResult {
    let p = try TestProcess(executable, arguments, environment: environment, in: folder)
    let status = try await p.waitForExit(timeout: timeout)
    return ProcessResult(status: status, stdout: p.stdout, stderr: p.stderr)
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, released).
func freeLoopbackPort() throws -> Int {
    let (fd, port) = try boundLoopbackSocket()
    close(fd)
    return port
}

/// A TCP socket bound to 127.0.0.1 on a port the kernel chose, and that port.
func boundLoopbackSocket() throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket() failed: \(errno)") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = bound == 0 ? withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    } : -1
    guard named == 0 else {
        let code = errno
        close(fd)
        throw HarnessError("bind() or getsockname() failed: \(code)")
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A server that never answers: it listens on 127.0.0.1 but never accepts, so the kernel completes connects and
/// queues what clients send, and nothing comes back. Closed when released.
final class SilentListener: Sendable {
    let fd: Int32
    let port: Int

    init() throws {
        (fd, port) = try boundLoopbackSocket()
        guard listen(fd, 16) == 0 else {
            close(fd)
            throw HarnessError("listen() failed: \(errno)")
        }
    }

    deinit { close(fd) }
}
