import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// An `openssl s_server` on 127.0.0.1 with a kernel-chosen port (no race with other tests for a "free" port),
/// killed by pid when released: started from Foundation.Process it does not act on SIGTERM.
public final class OpenSSLServer {
    public let process = Process()
    public let port: Int

    /// `accepts`: connections served before s_server exits (`-naccept`).
    public init(
        certificate: String, key: String, chain: String? = nil, arguments: [String] = [], accepts: Int = 200
    ) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        var args = [
            "openssl", "s_server", "-accept", "127.0.0.1:0", "-cert", certificate, "-key", key, "-naccept",
            String(accepts),
        ]
        if let chain { args += ["-cert_chain", chain] }
        process.arguments = args + arguments
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        process.standardInput = Pipe()  // s_server quits at EOF on stdin; keep it open
        try process.run()
        // s_server prints "ACCEPT 127.0.0.1:PORT" once listening; read its output for at most 10 seconds.
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
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT ") }) {
                found = line.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            }
        }
        guard let found else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw OpenSSLServerError(message: "s_server did not start: \(text)")
        }
        port = found
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// `openssl s_server` failed to start.
public struct OpenSSLServerError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
