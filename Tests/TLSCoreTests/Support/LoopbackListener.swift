import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A one-shot TCP listener on 127.0.0.1 (port chosen by the kernel) that captures the first bytes a client sends.
final class LoopbackListener {
    let fd: Int32
    let port: Int

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CLIError(message: "socket: \(errno)") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sp in
                bind(fd, sp, len) == 0 && listen(fd, 4) == 0 && getsockname(fd, sp, &len) == 0
            }
        }
        guard ok else {
            close(fd)
            throw CLIError(message: "bind/listen: \(errno)")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
    }

    deinit { close(fd) }

    /// Accepts one connection and reads until the client has been quiet for `idle` ms (max `limit` seconds).
    func captureFirstBytes(idle: Int32 = 400, limit: Double = 10) throws -> [UInt8] {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(limit * 1000)) == 1 else { throw CLIError(message: "no client connected") }
        let conn = accept(fd, nil, nil)
        guard conn >= 0 else { throw CLIError(message: "accept: \(errno)") }
        defer { close(conn) }
        var out: [UInt8] = []
        let deadline = Date().addingTimeInterval(limit)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while Date() < deadline {
            var cp = pollfd(fd: conn, events: Int16(POLLIN), revents: 0)
            let r = poll(&cp, 1, out.isEmpty ? 5000 : idle)
            if r <= 0 { break }
            let n = buffer.withUnsafeMutableBytes { recv(conn, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out.append(contentsOf: buffer[0..<n])
        }
        return out
    }
}

/// Starts `openssl s_client` against `port`, captures its ClientHello with `listener`, then stops it by pid.
func captureOpenSSLClientHello(_ extraArguments: [String]) throws -> [UInt8] {
    let listener = try LoopbackListener()
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["openssl", "s_client", "-connect", "127.0.0.1:\(listener.port)"] + extraArguments
    process.standardInput = Pipe()
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    defer {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
    return try listener.captureFirstBytes()
}
