#if canImport(Glibc)
import Glibc
#endif

/// A tiny blocking TCP client with timeouts, for one-shot tools such as `atsproxy diagnose` (never used on the
/// proxy's loop threads). Every wait goes through `poll` with a timeout, so nothing blocks forever.
///
/// Not `Sendable`: one caller owns the connection; the descriptor is closed on `close()` or deinit.
public final class BlockingTCPClient {
    private var fd: Int32
    /// The address actually connected to, e.g. `127.0.0.1:8443`.
    public let remoteDescription: String

    /// Resolves `host` (getaddrinfo, blocking) and connects to the first address that answers; `timeout` seconds
    /// bound all the addresses together. Throws why the name did not resolve, the last address's error
    /// (`ECONNREFUSED`, …) or a timeout.
    public init(host: String, port: Int, timeout: Double) throws(ConnectError) {
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int(max(0, timeout) * 1000))
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let rc = getaddrinfo(bare, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw .unresolvable(host: bare, message: String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(list) }
        var lastError = ConnectError.failed(errnoCode: EHOSTUNREACH)
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        // Bounded by the resolver's list.
        while let ai = cursor {
            cursor = ai.pointee.ai_next
            let left = deadline - clock.now
            guard left > .zero else { throw .timedOut(seconds: timeout) }
            do {
                let connected = try BlockingTCPClient.connect(ai.pointee, timeout: left.seconds)
                self.fd = connected
                self.remoteDescription = BlockingTCPClient.describe(ai.pointee) ?? "\(host):\(port)"
                return
            } catch {
                lastError =
                    error.errnoCode == ETIMEDOUT ? .timedOut(seconds: timeout) : .failed(errnoCode: error.errnoCode)
            }
        }
        throw lastError
    }

    deinit { close() }

    /// Closes the connection (idempotent).
    public func close() {
        if fd >= 0 {
            _ = Glibc.close(fd)
            fd = -1
        }
    }

    /// Sends all of `bytes`, waiting at most `timeout` seconds for each chunk to be accepted.
    public func send(_ bytes: [UInt8], timeout: Double) throws(IOError) {
        var offset = 0
        while offset < bytes.count {
            try wait(for: Int16(POLLOUT), timeout: timeout, call: "send")
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw IOError(errnoCode: errno, call: "send")
            }
            offset += n
        }
    }

    /// Receives up to `maxBytes`, waiting at most `timeout` seconds. Returns nil at end of stream (or reset);
    /// throws `ETIMEDOUT` when nothing arrived in time.
    public func receive(maxBytes: Int = 16_384, timeout: Double) throws(IOError) -> [UInt8]? {
        // Bounded: each iteration either returns or retries after EINTR/EAGAIN within the poll timeout.
        for _ in 0..<1000 {
            try wait(for: Int16(POLLIN), timeout: timeout, call: "recv")
            var buffer = [UInt8](repeating: 0, count: max(1, maxBytes))
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { return Array(buffer[0..<n]) }
            if n == 0 { return nil }
            if errno == EINTR || errno == EAGAIN { continue }
            if errno == ECONNRESET { return nil }
            throw IOError(errnoCode: errno, call: "recv")
        }
        throw IOError(errnoCode: ETIMEDOUT, call: "recv")
    }

    private func wait(for events: Int16, timeout: Double, call: String) throws(IOError) {
        guard fd >= 0 else { throw IOError(errnoCode: EBADF, call: call) }
        var pfd = pollfd(fd: fd, events: events, revents: 0)
        let rc = poll(&pfd, 1, Int32(max(0, timeout) * 1000))
        if rc == 0 { throw IOError(errnoCode: ETIMEDOUT, call: call) }
        if rc < 0, errno != EINTR { throw IOError(errnoCode: errno, call: "poll") }
    }

    private static func connect(_ ai: addrinfo, timeout: Double) throws(IOError) -> Int32 {
        let fd = socket(ai.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw IOError(errnoCode: errno, call: "socket") }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        if Glibc.connect(fd, ai.ai_addr, ai.ai_addrlen) != 0 && errno != EINPROGRESS {
            let e = errno
            _ = Glibc.close(fd)
            throw IOError(errnoCode: e, call: "connect")
        }
        var pfd = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let rc = poll(&pfd, 1, Int32(max(0, timeout) * 1000))
        if rc <= 0 {
            _ = Glibc.close(fd)
            throw IOError(errnoCode: rc == 0 ? ETIMEDOUT : errno, call: "connect")
        }
        var soError: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length)
        if soError != 0 {
            _ = Glibc.close(fd)
            throw IOError(errnoCode: soError, call: "connect")
        }
        return fd
    }

    private static func describe(_ ai: addrinfo) -> String? {
        var host = [CChar](repeating: 0, count: 64)
        var service = [CChar](repeating: 0, count: 16)
        guard
            getnameinfo(ai.ai_addr, ai.ai_addrlen, &host, 64, &service, 16, NI_NUMERICHOST | NI_NUMERICSERV) == 0
        else { return nil }
        let h = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let s = String(decoding: service.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return h.contains(":") ? "[\(h)]:\(s)" : "\(h):\(s)"
    }
}

@available(*, unavailable, message: "A BlockingTCPClient belongs to the one caller that opened it.")
extension BlockingTCPClient: Sendable {}

/// Why `BlockingTCPClient` could not connect, as one clause to put after the address.
public enum ConnectError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The name did not resolve; `message` is the resolver's (`gai_strerror`).
    case unresolvable(host: String, message: String)
    /// The last address failed with this errno (`ECONNREFUSED`, `ENETUNREACH`, …).
    case failed(errnoCode: Int32)
    /// No address accepted the connection within the timeout.
    case timedOut(seconds: Double)

    /// `Connection refused`, `no answer within 2 s`, `nosuch.test does not resolve (Name or service not known)`.
    public var description: String {
        switch self {
        case .unresolvable(let host, let message): "\(host) does not resolve (\(message))"
        case .failed(let code): String(cString: strerror(code))
        case .timedOut(let seconds):
            "no answer within \(seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)) s"
        }
    }
}

extension Duration {
    /// The duration in (fractional) seconds, for the `Double` timeouts above.
    var seconds: Double {
        let (s, attoseconds) = components
        return Double(s) + Double(attoseconds) / 1e18
    }
}
