import Dispatch
import Foundation
import ProxyEventLoop
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("ProxyEventLoop over loopback", .serialized)
struct EventLoopTests {
    @Test func listenerOnPortZeroReportsTheRealPort() throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in EchoHandler() }
        #expect(listener.port != 0)
        #expect(listener.address.host == "127.0.0.1")
        let client = try RawClient(port: listener.port)
        try client.send(Array("ping".utf8))
        #expect(try client.receive(exactly: 4) == Array("ping".utf8))
    }

    @Test func ipv6LoopbackListener() throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let listener = try group.listen(host: "::1", port: 0) { _ in EchoHandler() }
        #expect(listener.address.description == "[::1]:\(listener.port)")
        let client = try RawClient(port: listener.port, host: "::1")
        try client.send(Array("v6".utf8))
        #expect(try client.receive(exactly: 2) == Array("v6".utf8))
    }

    @Test func listenRejectsHostNames() throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        #expect(throws: IOError.self) { _ = try group.listen(host: "example.com", port: 0) { _ in EchoHandler() } }
    }

    @Test func echoWithTwoHundredConcurrentClients() throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdownGracefully(timeout: .seconds(2)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in EchoHandler() }
        let address = try SocketAddress(numericHost: "127.0.0.1", port: listener.port)
        let results = Collector<EchoClientHandler.Result>()
        let count = 200
        for i in 0..<count {
            let loop = group.next()
            loop.execute {
                let handler = EchoClientHandler(message: pattern(3000, seed: i), results: results)
                _ = loop.connect(to: address, timeout: .seconds(10), handler: handler)
            }
        }
        #expect(results.wait(for: count))
        let all = results.values
        #expect(all.count == count)
        #expect(all.allSatisfy { $0.error == nil && $0.opened })
        let expected = Set((0..<count).map { pattern(3000, seed: $0) })
        #expect(Set(all.map(\.received)) == expected)
    }

    @Test func halfCloseLetsTheServerAnswerAfterTheClientsFIN() throws {
        /// Replies "bye" only after the client's FIN, then half-closes itself.
        final class ByeHandler: ConnectionHandler {
            let closed: Collector<IOError?>
            init(closed: Collector<IOError?>) { self.closed = closed }
            func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
                connection.write(bytes)
            }
            func connectionReadEOF(_ connection: Connection) {
                connection.write(Array("bye".utf8))
                connection.shutdownWrite()
            }
            func connectionClosed(_ connection: Connection, error: IOError?) { closed.add(error) }
        }
        let closed = Collector<IOError?>()
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in ByeHandler(closed: closed) }
        let client = try RawClient(port: listener.port)
        try client.send(Array("hello".utf8))
        #expect(try client.receive(exactly: 5) == Array("hello".utf8))
        client.shutdownWrite()
        #expect(try client.readToEOF() == Array("bye".utf8))
        // Both directions are finished, so the server side closes itself without an error.
        #expect(closed.wait(for: 1))
        #expect(closed.values.count == 1 && closed.values[0] == nil)
    }

    /// Answers the first bytes it receives with `answer`, run in that callback.
    final class AnswerHandler: ConnectionHandler {
        let answer: (Connection) -> Void
        init(_ answer: @escaping (Connection) -> Void) { self.answer = answer }
        func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) { answer(connection) }
    }

    /// Sends "go" to a server that answers with `answer`, and returns everything it sent up to its close.
    func exchange(answer: @escaping @Sendable (Connection) -> Void) throws -> [UInt8] {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in AnswerHandler(answer) }
        let client = try RawClient(port: listener.port)
        try client.send(Array("go".utf8))
        return try client.readToEOF()
    }

    @Test func smallAndLargeWritesOfOneCallbackArriveInOrder() throws {
        // Writes made while the loop handles a batch of events wait for the batch's end (the loop's theory of
        // operation, point 7), except large ones; all must still go out in the order written.
        let received = try exchange { connection in
            connection.write(Array("head ".utf8))
            connection.write(pattern(100_000))  // large: not held, yet it must not overtake the held head
            Array(" tail".utf8).withUnsafeBytes { connection.write($0) }
            connection.close()
        }
        #expect(received.count == 5 + 100_000 + 5)
        #expect(received == Array("head ".utf8) + pattern(100_000) + Array(" tail".utf8))
    }

    @Test func anAbortRightAfterSmallWritesStillSendsThem() throws {
        // abort() drops what the socket cannot take; an empty socket takes ten bytes, so all of them must arrive,
        // although the loop was holding them for the end of its batch.
        let received = try exchange { connection in
            connection.write(Array("last ".utf8))
            connection.write(Array("words".utf8))
            connection.abort()
        }
        #expect(received == Array("last words".utf8))
    }

    /// Records what a connection receives and how it closes.
    final class RecordingHandler: ConnectionHandler {
        let received: Collector<[UInt8]>
        let closed: Collector<IOError?>
        init(received: Collector<[UInt8]>, closed: Collector<IOError?>) {
            self.received = received
            self.closed = closed
        }
        func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) { received.add(Array(bytes)) }
        func connectionClosed(_ connection: Connection, error: IOError?) { closed.add(error) }
    }

    @Test func bytesThatArrivedBeforeAResetAreDeliveredBeforeTheError() throws {
        // A client that refuses the proxy's certificate sends its TLS alert and closes with a reset; the alert is
        // what says why, so it must reach the handler although the reset is already there when the loop looks.
        let received = Collector<[UInt8]>()
        let closed = Collector<IOError?>()
        let accepted = Collector<Bool>()
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in
            accepted.add(true)
            return RecordingHandler(received: received, closed: closed)
        }
        var client: RawClient? = try RawClient(port: listener.port)
        #expect(accepted.wait(for: 1))
        let alert: [UInt8] = [0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x30]  // fatal unknown_ca
        // The bytes and the reset arrive while the loop is busy, so that one epoll_wait reports both.
        try whileBusy(group.next()) {
            try client?.send(alert)
            client?.resetOnClose()
            client = nil
        }
        #expect(closed.wait(for: 1))
        #expect(received.values.flatMap { $0 } == alert)
        #expect(closed.values.first??.errnoCode == ECONNRESET)
    }

    /// Runs `body` on the test thread while `loop` is blocked, then lets the loop go on: what `body` sends arrives in
    /// one `epoll_wait` batch, in the order sent.
    func whileBusy(_ loop: EventLoop, _ body: () throws -> Void) throws {
        let busy = Collector<Bool>()
        let release = DispatchSemaphore(value: 0)
        loop.execute {
            busy.add(true)
            release.wait()
        }
        #expect(busy.wait(for: 1))
        defer { release.signal() }
        try body()
        usleep(50_000)  // loopback delivery is immediate; this only makes sure every byte is there
    }

    /// The first connection answers at once, the second takes 5 ms, the third checks whether the first's answer
    /// has gone out.
    final class SlowBatchHandler: ConnectionHandler {
        final class Shared: @unchecked Sendable {
            // Touched only on the loop thread.
            var answered: Connection?
            var nextRole = 0
            let pendingAtThird = Collector<Int>()
        }
        let role: Int
        let shared: Shared
        init(role: Int, shared: Shared) {
            self.role = role
            self.shared = shared
        }
        func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
            switch role {
            case 0:
                connection.write(Array("answer".utf8))
                shared.answered = connection
            case 1: usleep(5_000)
            default: shared.pendingAtThird.add(shared.answered?.bufferedWriteBytes ?? -1)
            }
        }
    }

    @Test func aSlowEventDoesNotHoldTheOthersWritesPastTheLimit() throws {
        // Writes wait for the end of their batch, but no longer than EventLoop.maximumWriteHold (1 ms): after an
        // event that took 5 ms, the first connection's answer must be out before the third is handled.
        let shared = SlowBatchHandler.Shared()
        let accepted = Collector<Int>()
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in
            let role = shared.nextRole
            shared.nextRole += 1
            accepted.add(role)
            return SlowBatchHandler(role: role, shared: shared)
        }
        var clients: [RawClient] = []
        for _ in 0..<3 {
            clients.append(try RawClient(port: listener.port))
            #expect(accepted.wait(for: 1))  // accepted in order, so the roles follow the clients
        }
        try whileBusy(group.next()) {
            for client in clients { try client.send([1]) }
        }
        #expect(try clients[0].receive(exactly: 6) == Array("answer".utf8))
        #expect(shared.pendingAtThird.wait(for: 1))
        #expect(shared.pendingAtThird.values == [0])
    }

    @Test func connectToAClosedPortIsRefused() throws {
        // Bind a port and close it again: nothing listens there afterwards.
        let port: UInt16
        do {
            let group = try EventLoopGroup(loopCount: 1)
            let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in EchoHandler() }
            port = listener.port
            group.shutdownGracefully(timeout: .zero)
        }
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let results = Collector<EchoClientHandler.Result>()
        let address = try SocketAddress(numericHost: "127.0.0.1", port: port)
        let loop = group.next()
        loop.execute {
            _ = loop.connect(
                to: address, timeout: .seconds(5), handler: EchoClientHandler(message: [1], results: results))
        }
        #expect(results.wait(for: 1))
        #expect(results.values.first?.error == IOError(errnoCode: ECONNREFUSED, call: "connect"))
        #expect(results.values.first?.opened == false)
    }

    @Test func connectTimesOutWhenTheBacklogIsFull() throws {
        // A listening socket that never accepts: once its accept queue is full the kernel drops further SYNs, so a
        // connect can only end by our timeout.
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(server) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { ptr in
                bind(server, ptr, length)
                listen(server, 0)
                return getsockname(server, ptr, &length)
            }
        }
        let port = UInt16(bigEndian: address.sin_port)
        // Non-blocking fillers: the first completes into the queue, the rest hang in SYN_SENT like our connect will.
        var fillers: [Int32] = []
        defer { for fd in fillers { Glibc.close(fd) } }
        for _ in 0..<3 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue), 0)
            fillers.append(fd)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        usleep(50_000)

        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let results = Collector<EchoClientHandler.Result>()
        let target = try SocketAddress(numericHost: "127.0.0.1", port: port)
        let loop = group.next()
        let started = ContinuousClock.now
        loop.execute {
            _ = loop.connect(
                to: target, timeout: .milliseconds(300), handler: EchoClientHandler(message: [1], results: results))
        }
        #expect(results.wait(for: 1))
        #expect(results.values.first?.error == IOError(errnoCode: ETIMEDOUT, call: "connect"))
        #expect(ContinuousClock.now - started >= .milliseconds(290))
    }

    @Test func timersFireInDeadlineOrderAndCancelledOnesNever() throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let fired = Collector<String>()
        let loop = group.next()
        loop.execute {
            loop.scheduleTimer(after: .milliseconds(60)) { fired.add("60") }
            loop.scheduleTimer(after: .milliseconds(20)) { fired.add("20a") }
            let cancelled = loop.scheduleTimer(after: .milliseconds(10)) { fired.add("cancelled") }
            loop.scheduleTimer(after: .milliseconds(40)) { fired.add("40") }
            loop.scheduleTimer(after: .milliseconds(20)) { fired.add("20b") }
            loop.scheduleTimer(after: .zero) { fired.add("0") }
            loop.cancelTimer(cancelled)
        }
        #expect(fired.wait(for: 5))
        // One more timer after all others proves the cancelled one had its chance and did not fire.
        loop.execute { loop.scheduleTimer(after: .milliseconds(30)) { fired.add("end") } }
        #expect(fired.wait(for: 1))
        #expect(fired.values == ["0", "20a", "20b", "40", "60", "end"])
    }

    @Test func tasksFromManyThreadsRunOnTheLoopThread() throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let loop = group.next()
        #expect(!loop.inEventLoop)
        let done = Collector<Bool>()
        let perThread = 2000
        let threads = 4
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<perThread { loop.execute { done.add(loop.inEventLoop) } }
        }
        #expect(done.wait(for: perThread * threads))
        #expect(done.values.count == perThread * threads)
        #expect(done.values.allSatisfy { $0 })
    }
}

@Suite("ProxyEventLoop name resolution")
struct ResolveTests {
    @Test("hosts that need no network", arguments: ["localhost", "127.0.0.1", "[::1]"])
    func resolvesOnTheLoopThread(host: String) throws {
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let loop = group.next()
        let results = Collector<(onLoop: Bool, addresses: [SocketAddress])>()
        loop.execute {
            loop.resolve(host: host, port: 8443) { result in
                results.add((loop.inEventLoop, (try? result.get()) ?? []))
            }
        }
        #expect(results.wait(for: 1))
        let result = try #require(results.values.first)
        #expect(result.onLoop)
        #expect(!result.addresses.isEmpty)
        #expect(result.addresses.allSatisfy { $0.port == 8443 && ($0.host == "127.0.0.1" || $0.host == "::1") })
    }
}
