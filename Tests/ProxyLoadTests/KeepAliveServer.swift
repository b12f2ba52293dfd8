import Foundation
import HTTP1Core
import ProxyEventLoop

/// A small HTTP/1.1 keep-alive server on 127.0.0.1 (a kernel-chosen port) with its own event loop, for running the
/// built client against: it answers every request with `body`, alternating Content-Length and chunked framing, and
/// with `closeEvery: k` ends each connection after its k-th response with `Connection: close`.
final class KeepAliveServer: Sendable {
    private let group: EventLoopGroup
    private let listener: Listener
    private let counters = Counters()
    var port: UInt16 { listener.port }
    /// Connections accepted and responses sent so far.
    var accepted: Int { counters.read().accepted }
    var responses: Int { counters.read().responses }

    init(body: [UInt8], closeEvery: Int? = nil) throws {
        group = try EventLoopGroup(loopCount: 1)
        let counters = self.counters
        listener = try group.listen(host: "127.0.0.1", port: 0) { _ in
            counters.accepted()
            return KeepAliveServerHandler(body: body, closeEvery: closeEvery, counters: counters)
        }
    }

    deinit { group.shutdownGracefully(timeout: .seconds(2)) }

    /// Counts shared between the loop thread and the test.
    final class Counters: Sendable {
        // NSLock rather than Synchronization.Mutex: ThreadSanitizer understands pthread locks.
        private let lock = NSLock()
        nonisolated(unsafe) private var values = (accepted: 0, responses: 0)

        func accepted() { lock.withLock { values.accepted += 1 } }
        func responded() { lock.withLock { values.responses += 1 } }
        func read() -> (accepted: Int, responses: Int) { lock.withLock { values } }
    }
}

/// One server connection: parses requests, answers each in turn.
private final class KeepAliveServerHandler: ConnectionHandler {
    private let body: [UInt8]
    private let closeEvery: Int?
    private let counters: KeepAliveServer.Counters
    private var parser = HTTP1Parser(role: .requests)
    private var served = 0

    init(body: [UInt8], closeEvery: Int?, counters: KeepAliveServer.Counters) {
        self.body = body
        self.closeEvery = closeEvery
        self.counters = counters
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        parser.receive(bytes)
        do {
            // Bounded: each round consumes buffered bytes or stops.
            for _ in 0..<10_000 {
                switch try parser.nextEvent() {
                case .end:
                    served += 1
                    let last = closeEvery.map { served % $0 == 0 } ?? false
                    connection.write(response(chunked: served % 2 == 0, close: last))
                    counters.responded()
                    if last {
                        connection.close()
                        return
                    }
                    try parser.startNextMessage()
                case .needMoreData, .connectionClosed:
                    return
                default:
                    continue
                }
            }
        } catch {
            connection.abort()
        }
    }

    func connectionReadEOF(_ connection: Connection) {
        connection.close()
    }

    private func response(chunked: Bool, close: Bool) -> [UInt8] {
        var head = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        if close { head += "Connection: close\r\n" }
        if chunked {
            let half = body.count / 2
            return Array((head + "Transfer-Encoding: chunked\r\n\r\n" + String(half, radix: 16) + "\r\n").utf8)
                + body[..<half] + Array(("\r\n" + String(body.count - half, radix: 16) + "\r\n").utf8)
                + body[half...] + Array("\r\n0\r\n\r\n".utf8)
        }
        return Array((head + "Content-Length: \(body.count)\r\n\r\n").utf8) + body
    }
}
