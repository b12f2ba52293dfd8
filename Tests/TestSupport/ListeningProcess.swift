import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Starts `process` (a local test server) with stdout on a pipe and stdin held open, since the servers exit at EOF on
/// stdin, and reads its output for at most 10 seconds until `port` finds the listening port in a line. If none
/// comes, the process is killed and `failure` (given the output so far) is thrown. Stderr goes to `stderr` (by
/// default nowhere).
public func launchAndReadPort(
    _ process: Process, stderr: FileHandle = .nullDevice, port: (Substring) -> Int?, failure: (String) -> any Error
) throws -> Int {
    let out = Pipe()
    process.standardOutput = out
    process.standardError = stderr
    process.standardInput = Pipe()
    try process.run()
    let fd = out.fileHandleForReading.fileDescriptor
    var text = ""
    var found: Int?
    let deadline = Date().addingTimeInterval(10)
    while found == nil, Date() < deadline {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 500) == 1 else { continue }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let n = read(fd, &buffer, 1024)
        if n <= 0 { break }
        text += String(decoding: buffer[0..<n], as: UTF8.self)
        found = text.split(separator: "\n").lazy.compactMap(port).first
    }
    guard let found else {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        throw failure(text)
    }
    return found
}
