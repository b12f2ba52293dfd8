import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A command run to its end: its exit status and what it printed.
public struct CommandResult: Sendable {
    public let status: Int32
    public let stdout: Data
    public let stderr: Data

    public var stdoutText: String { String(decoding: stdout, as: UTF8.self) }
    public var stderrText: String { String(decoding: stderr, as: UTF8.self) }
}

/// Runs `executable` (a path, or a name found on `PATH`) with `arguments` to its end, in `directory` when given,
/// with `input` on its standard input (or none). Both output pipes are read at once, so neither can fill and block
/// the child, and the child is killed by pid after `limit` seconds: a hung tool fails its test instead of hanging
/// the suite (its status is then that of SIGKILL).
public func runCommand(
    _ executable: String, _ arguments: [String], in directory: URL? = nil, input: Data? = nil, limit: Double = 120
) throws -> CommandResult {
    let process = Process()
    if executable.contains("/") {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
    } else {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
    }
    if let directory { process.currentDirectoryURL = directory }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let inPipe = input.map { _ in Pipe() }
    process.standardInput = inPipe ?? FileHandle.nullDevice
    try process.run()
    let pid = process.processIdentifier
    let watchdog = DispatchWorkItem { kill(pid, SIGKILL) }
    DispatchQueue.global().asyncAfter(deadline: .now() + limit, execute: watchdog)
    defer { watchdog.cancel() }
    let stderr = ReadToEnd(err.fileHandleForReading)
    if let input, let inPipe {
        // On a thread of its own, as the child may print before it reads; and a child that exits without reading
        // all of it must not stop the tests with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let writing = inPipe.fileHandleForWriting
        Thread {
            do {
                try writing.write(contentsOf: input)
            } catch {
                // The child closed its standard input before reading all of it (EPIPE). Whether that was right is
                // for its exit status and output to say, which the caller checks; the pipe is closed all the same.
            }
            do {
                try writing.close()
            } catch {
                // Closing fails only on a descriptor already closed: nothing is left to release.
            }
        }.start()
    }
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus, stdout: stdout, stderr: stderr.wait())
}

/// Reads a pipe to its end on a thread of its own.
private final class ReadToEnd: @unchecked Sendable {
    // @unchecked: `data` is written once on the reading thread, before `done` is signalled, and read after.
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }.start()
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}
