import Dispatch
import Foundation
import ProxyEventLoop
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Sends `total` bytes of `pattern` as fast as writability allows, recording the largest write buffer seen.
final class ProducerHandler: ConnectionHandler {
    private let data: [UInt8]
    private var offset = 0
    private var maxBuffered = 0
    private var pausedCount = 0
    private let report: Collector<(maxBuffered: Int, pauses: Int, error: IOError?)>

    init(data: [UInt8], report: Collector<(maxBuffered: Int, pauses: Int, error: IOError?)>) {
        self.data = data
        self.report = report
    }

    func connectionOpened(_ connection: Connection) { produce(connection) }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {}

    func connection(_ connection: Connection, writabilityChanged writable: Bool) {
        if writable { produce(connection) } else { pausedCount += 1 }
    }

    private func produce(_ connection: Connection) {
        while offset < data.count && connection.isWritable {
            let end = min(offset + 16 * 1024, data.count)
            data[offset..<end].withUnsafeBytes { connection.write($0) }
            offset = end
            maxBuffered = max(maxBuffered, connection.bufferedWriteBytes)
        }
        if offset == data.count { connection.close() }
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        report.add((maxBuffered, pausedCount, error))
    }
}

/// For a proxy-style test: on accept, connects to `upstream` on the same loop and relays.
final class RelayingHandler: ConnectionHandler {
    private let upstream: SocketAddress
    init(upstream: SocketAddress) { self.upstream = upstream }

    func connectionOpened(_ connection: Connection) {
        connection.pauseReading()
        _ = connection.loop.connect(to: upstream, timeout: .seconds(5), handler: UpstreamOpener(client: connection))
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {}
}

final class UpstreamOpener: ConnectionHandler {
    private let client: Connection
    init(client: Connection) { self.client = client }

    func connectionOpened(_ connection: Connection) {
        Relay.start(client, connection)
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {}

    func connectionClosed(_ connection: Connection, error: IOError?) {
        if error != nil { client.abort() }
    }
}

@Suite("ProxyEventLoop transfers", .serialized)
struct TransferTests {
    static let tenMiB = pattern(10 * 1024 * 1024)

    @Test func tenMiBToASlowReaderIsByteExactAndBounded() throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(2)) }
        let report = Collector<(maxBuffered: Int, pauses: Int, error: IOError?)>()
        let data = Self.tenMiB
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in
            ProducerHandler(data: data, report: report)
        }
        let client = try RawClient(port: listener.port)
        var received: [UInt8] = []
        received.reserveCapacity(data.count)
        // Slow at first (so the kernel buffers fill and backpressure must engage), then fast.
        while true {
            let piece = try client.receive(max: 16 * 1024)
            if piece.isEmpty { break }
            received += piece
            if received.count < 3 * 1024 * 1024 { usleep(500) }
        }
        #expect(received.count == data.count)
        #expect(received == data)
        #expect(report.wait(for: 1))
        let result = try #require(report.values.first)
        #expect(result.error == nil)
        #expect(result.pauses > 0)
        // Never more than the high-water mark plus the one piece written while still below it.
        #expect(result.maxBuffered <= 256 * 1024 + 16 * 1024)
    }

    @Test func relayCarriesTenMiBBothWaysWithBackpressure() throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdownGracefully(timeout: .seconds(2)) }
        let echo = try group.listen(host: "127.0.0.1", port: 0) { _ in EchoHandler() }
        let upstream = try SocketAddress(numericHost: "127.0.0.1", port: echo.port)
        let proxy = try group.listen(host: "127.0.0.1", port: 0) { _ in RelayingHandler(upstream: upstream) }
        let client = try RawClient(port: proxy.port)
        let data = Self.tenMiB
        let sendError = Collector<IOError>()
        let writer = Thread {
            do {
                try client.send(data)
                client.shutdownWrite()
            } catch let error as IOError {
                sendError.add(error)
            } catch {}
        }
        writer.start()
        let echoed = try client.readToEOF()
        #expect(sendError.values.isEmpty)
        #expect(echoed.count == data.count)
        #expect(echoed == data)
    }

    @Test func noDescriptorLeakAfterTenThousandConnections() throws {
        let group = try EventLoopGroup(loopCount: 2)
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in EchoHandler() }
        let address = try SocketAddress(numericHost: "127.0.0.1", port: listener.port)
        let results = Collector<EchoClientHandler.Result>()
        let batch = 100
        for round in 0..<100 {
            for i in 0..<batch {
                let loop = group.next()
                loop.execute {
                    _ = loop.connect(
                        to: address, timeout: .seconds(10),
                        handler: EchoClientHandler(message: [UInt8(i)], results: results))
                }
            }
            if !results.wait(for: batch) {
                Issue.record("round \(round) did not finish")
                break
            }
        }
        let failures = results.values.filter { $0.error != nil || $0.received.count != 1 }.count
        #expect(results.values.count == 10_000)
        #expect(failures == 0)
        // With every exchange finished, only the listening socket may remain; a leak would be one per connection.
        // Counted by port, not in total, because the other suites open descriptors in this process meanwhile.
        // The servers' ends close once they read the clients' FINs, which may be just after the results arrive.
        let port = listener.port
        var open = 0
        let settled = try eventually {
            open = try openSocketDescriptors(onPort: port)
            return open == 1
        }
        #expect(settled, "\(open) sockets on the port after 10,000 connections; only the listener should remain")
        group.shutdownGracefully(timeout: .seconds(2))
        open = try openSocketDescriptors(onPort: port)
        #expect(open == 0, "\(open) sockets on the port after shutdown")
    }
}

/// Writes a few bytes, then resets the connection.
final class ResettingHandler: ConnectionHandler {
    func connectionOpened(_ connection: Connection) {
        connection.write(Array("partial".utf8))
        connection.reset()
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {}
}

@Suite("Connection.reset")
struct ConnectionResetTests {
    @Test("reset() sends the queued bytes, then a TCP reset: the peer reads them, then ECONNRESET, never an EOF")
    func resetAfterQueuedBytes() throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(2)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in ResettingHandler() }
        let client = try RawClient(port: listener.port)
        var received: [UInt8] = []
        var ending = "nothing"
        // Bounded: each pass reads at least a byte, or ends.
        for _ in 0..<64 {
            do {
                let piece = try client.receive(max: 1024)
                if piece.isEmpty {
                    ending = "EOF"
                    break
                }
                received += piece
            } catch let error as IOError {
                ending = error.errnoCode == ECONNRESET ? "reset" : "\(error)"
                break
            }
        }
        #expect(received == Array("partial".utf8))
        #expect(ending == "reset")
    }
}
