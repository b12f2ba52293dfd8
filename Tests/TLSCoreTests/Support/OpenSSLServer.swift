import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A minimal blocking TCP connection to 127.0.0.1 for driving a TLSEngine against a real server.
final class TCPConnection {
    let fd: Int32

    init(port: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CLIError(message: "socket: \(errno)") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            close(fd)
            throw CLIError(message: "connect: \(errno)")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw CLIError(message: "send: \(errno)") }
            offset += n
        }
    }

    /// Next bytes, or nil at EOF/reset/timeout (5 s).
    func receive() throws -> [UInt8]? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, 5000) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 16384)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 0 ? Array(buffer[0..<n]) : nil
    }
}
