import Dispatch
import Foundation
import ProxyEventLoop
#if canImport(Glibc)
import Glibc
#endif

/// Thread-safe storage for results produced on loop threads and checked on the test thread.
final class Collector<Value: Sendable>: Sendable {
    // NSLock rather than Synchronization.Mutex: ThreadSanitizer understands pthread locks, not Mutex's futexes.
    private let lock = NSLock()
    nonisolated(unsafe) private var storage: [Value] = []
    private let signal = DispatchSemaphore(value: 0)

    func add(_ value: Value) {
        lock.withLock { storage.append(value) }
        signal.signal()
    }

    var values: [Value] { lock.withLock { storage } }

    /// Waits until `count` values were added, or `seconds` passed. Returns whether they all arrived.
    func wait(for count: Int, seconds: Double = 20) -> Bool {
        let deadline = DispatchTime.now() + seconds
        for _ in 0..<count where signal.wait(timeout: deadline) == .timedOut {
            return false
        }
        return true
    }
}

/// A deterministic byte pattern, so a byte-exact comparison also catches reordering.
func pattern(_ count: Int, seed: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 31 &+ $0 >> 8 &+ seed) % 251) }
}

/// A plain blocking client socket for driving the loop from the test thread.
final class RawClient: Sendable {
    let fd: Int32

    init(port: UInt16, host: String = "127.0.0.1") throws {
        let family = host.contains(":") ? AF_INET6 : AF_INET
        fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw IOError(errnoCode: errno, call: "socket") }
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let rc: Int32
        if family == AF_INET {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            inet_pton(AF_INET, host, &address.sin_addr)
            rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        } else {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            inet_pton(AF_INET6, host, &address.sin6_addr)
            rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        if rc < 0 {
            let code = errno
            Glibc.close(fd)
            throw IOError(errnoCode: code, call: "connect")
        }
    }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw IOError(errnoCode: errno, call: "send")
            }
            offset += n
        }
    }

    /// Up to `max` bytes; empty at EOF.
    func receive(max: Int = 65536) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: max)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, max, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                throw IOError(errnoCode: errno, call: "recv")
            }
            return Array(buffer[0..<n])
        }
    }

    func receive(exactly count: Int) throws -> [UInt8] {
        var result: [UInt8] = []
        while result.count < count {
            let piece = try receive(max: min(65536, count - result.count))
            if piece.isEmpty { break }
            result += piece
        }
        return result
    }

    func readToEOF() throws -> [UInt8] {
        var result: [UInt8] = []
        while true {
            let piece = try receive()
            if piece.isEmpty { return result }
            result += piece
        }
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Makes the coming close send a reset (RST) instead of a FIN.
    func resetOnClose() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }

    deinit { Glibc.close(fd) }
}

/// Echoes everything; answers a read EOF with its own FIN (after the echoed bytes).
final class EchoHandler: ConnectionHandler {
    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        connection.write(bytes)
        if !connection.isWritable { connection.pauseReading() }
    }

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        if writable { connection.resumeReading() }
    }

    func connectionReadEOF(_ connection: Connection) {
        connection.shutdownWrite()
    }
}

/// Counts this process's descriptors that are TCP sockets with `port` at either end.
///
/// Test suites run in parallel in one process, so a count of all descriptors moves with whatever the other suites
/// open; sockets on a test's own listening port are that test's alone. The ends are read with getsockname and
/// getpeername, not from /proc/net/tcp, because a leaked socket whose connection has fully closed has left the
/// kernel's table but keeps its local address. (A client's end in that state has no peer address, so only its
/// server end can show such a leak.)
func openSocketDescriptors(onPort port: UInt16) throws -> Int {
    var count = 0
    for name in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
        guard let fd = Int32(name) else { continue }
        var type: Int32 = 0
        var typeLength = socklen_t(MemoryLayout<Int32>.size)
        // Fails for descriptors that are not sockets, or that another suite closed since the listing.
        guard getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &typeLength) == 0, type == Int32(SOCK_STREAM.rawValue) else {
            continue
        }
        let ends = [getsockname, getpeername].compactMap { call -> UInt16? in
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let result = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &length) }
            }
            guard result == 0 else { return nil }
            // sin_port and sin6_port sit at the same offset, in network byte order.
            return withUnsafeBytes(of: &address) { UInt16(bigEndian: $0.load(fromByteOffset: 2, as: UInt16.self)) }
        }
        if ends.contains(port) { count += 1 }
    }
    return count
}

/// Polls `condition` every 10 ms until it holds or `seconds` pass; returns whether it held.
func eventually(seconds: Double = 5, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try condition() { return true }
        usleep(10_000)
    }
    return try condition()
}
