import Foundation
import HTTP2Core
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Talks h2 (prior knowledge, cleartext) to a real `nghttpd` on 127.0.0.1 through a plain socket.
@Suite("H2Session against nghttpd")
struct NghttpdInteropTests {
    @Test("fetches files and echoes an upload byte-exact from nghttpd --no-tls")
    func fetchFromNghttpd() throws {
        let htdocs = FileManager.default.temporaryDirectory.appendingPathComponent("h2-interop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: htdocs, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: htdocs) }
        let big = patternBytes(count: 700_000, seed: 42)
        try Data(big).write(to: htdocs.appendingPathComponent("big.bin"))
        try Data("hello\n".utf8).write(to: htdocs.appendingPathComponent("small.txt"))

        let (server, port, fd) = try startNghttpd(htdocs: htdocs)
        defer {
            // SIGKILL, not SIGTERM: the child inherits the test thread's signal mask, in which Dispatch
            // worker threads block SIGTERM, so nghttpd would never see it.
            kill(server.processIdentifier, SIGKILL)
            server.waitUntilExit()
            close(fd)
        }

        let client = try H2Session(role: .client)
        let authority = "127.0.0.1:\(port)"
        func get(_ path: String) throws -> Int32 {
            try client.submitRequest(
                [H2Header(":method", "GET"), H2Header(":scheme", "http"), H2Header(":authority", authority),
                 H2Header(":path", path)], body: .none)
        }
        let bigID = try get("/big.bin")
        let smallID = try get("/small.txt")
        let missingID = try get("/missing")
        let upload = patternBytes(count: 200_000, seed: 9)
        let uploadID = try client.submitRequest(
            [H2Header(":method", "POST"), H2Header(":scheme", "http"), H2Header(":authority", authority),
             H2Header(":path", "/echo"), H2Header("content-length", String(upload.count))], body: .streaming)
        try client.sendData(streamID: uploadID, upload, endStream: true)

        var events: [H2Event] = []
        var closed: Set<Int32> = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var rounds = 0
        while closed.count < 4 && rounds < 10_000 {
            rounds += 1
            try writeAll(fd, client.pendingOutput())
            events += client.takeEvents()
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 5_000) > 0 else {
                Issue.record("nghttpd did not answer within 5 s")
                break
            }
            let n = read(fd, &buffer, buffer.count)
            guard n > 0 else {
                Issue.record("nghttpd closed the connection")
                break
            }
            for event in try client.receive(buffer[0..<n]) {
                events.append(event)
                switch event {
                case .data(let id, let bytes, _): client.consume(streamID: id, count: bytes.count)
                case .streamClosed(let id, _): closed.insert(id)
                default: break
                }
            }
        }

        let streams = events.streams()
        #expect(streams[bigID]?.heads.first?.fields.first(named: ":status") == "200")
        #expect(streams[bigID]?.body.count == big.count)
        #expect(checksum(streams[bigID]?.body ?? []) == checksum(big))
        #expect(streams[smallID]?.body == Array("hello\n".utf8))
        #expect(streams[missingID]?.heads.first?.fields.first(named: ":status") == "404")
        #expect(streams[uploadID]?.heads.first?.fields.first(named: ":status") == "200")
        #expect(BodyDigest(streams[uploadID]?.body) == BodyDigest(upload))
        #expect([bigID, smallID, missingID, uploadID].allSatisfy { streams[$0]?.closedWith == .noError })
        #expect(events.contains { if case .settings(false, _) = $0 { true } else { false } })

        // A graceful goodbye is understood by nghttpd.
        try client.submitGoAway()
        try writeAll(fd, client.pendingOutput())
    }
}

/// A port that was free a moment ago (bound to 0, read back, released).
private func freeLoopbackPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SocketFailure(call: "socket", code: errno) }
    defer { close(fd) }
    var address = loopback(port: 0)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0 else { throw SocketFailure(call: "bind", code: errno) }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { throw SocketFailure(call: "getsockname", code: errno) }
    return UInt16(bigEndian: address.sin_port)
}

/// Connects to 127.0.0.1:`port`, retrying while the server starts (at most ~5 s).
/// Starts `nghttpd --no-tls` on a free port and connects to it. Tests run in parallel, so another test's server
/// can take the port between the probe and nghttpd's bind; then this nghttpd exits while the port still accepts.
/// The server is only ours if its process is still running once connected: otherwise retry on a new port.
private func startNghttpd(htdocs: URL) throws -> (Process, UInt16, Int32) {
    var attempt = 0
    while true {
        attempt += 1
        let port = try freeLoopbackPort()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["nghttpd", "--no-tls", "--echo-upload", "-a", "127.0.0.1", "-d", htdocs.path, "\(port)"]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        let fd = try connectWithRetry(port: port)
        usleep(100_000)
        if server.isRunning { return (server, port, fd) }
        close(fd)
        server.waitUntilExit()
        guard attempt < 5 else { throw SocketFailure(call: "nghttpd on a free port", code: EADDRINUSE) }
    }
}

private func connectWithRetry(port: UInt16) throws -> Int32 {
    var lastError: Int32 = 0
    for _ in 0..<100 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketFailure(call: "socket", code: errno) }
        var address = loopback(port: port)
        let rv = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if rv == 0 { return fd }
        lastError = errno
        close(fd)
        usleep(50_000)
    }
    throw SocketFailure(call: "connect", code: lastError)
}

private func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
    var offset = 0
    while offset < bytes.count {
        let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { throw SocketFailure(call: "write", code: errno) }
        offset += n
    }
}

private func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    return address
}

private struct SocketFailure: Error, CustomStringConvertible {
    var call: String
    var code: Int32
    var description: String { "\(call) failed: errno \(code)" }
}
