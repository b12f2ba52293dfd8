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
        // s_server prints "ACCEPT 127.0.0.1:PORT" once listening (and quits at EOF on stdin).
        port = try launchAndReadPort(process) { line in
            line.hasPrefix("ACCEPT ") ? line.split(separator: ":").last.flatMap {
                Int($0.trimmingCharacters(in: .whitespaces))
            } : nil
        } failure: { OpenSSLServerError(message: "s_server did not start: \($0)") }
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
