import Dispatch
import Foundation
import ProxyEventLoop
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Answers each line after `delay`, like a slow backend; when asked to shut down it closes after the answer in
/// flight, or at once when idle.
final class SlowAnswerHandler: ConnectionHandler {
    private let delay: Duration
    private let received: Collector<Bool>
    private var busy = false
    private var shutdownRequested = false

    init(delay: Duration, received: Collector<Bool>) {
        self.delay = delay
        self.received = received
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        busy = true
        received.add(true)
        connection.startTimer(after: delay)
    }

    func connection(_ connection: Connection, timerFired timer: TimerID) {
        connection.write(Array("answer".utf8))
        busy = false
        if shutdownRequested { connection.close() }
    }

    func connectionShutdownRequested(_ connection: Connection) {
        shutdownRequested = true
        if !busy { connection.close() }
    }
}

@Suite("ProxyEventLoop graceful shutdown", .serialized)
struct ShutdownTests {
    @Test func inFlightWorkFinishesAndNewConnectionsAreRefused() throws {
        let group = try EventLoopGroup(loopCount: 2)
        let received = Collector<Bool>()
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in
            SlowAnswerHandler(delay: .milliseconds(300), received: received)
        }
        let port = listener.port
        let client = try RawClient(port: port)
        try client.send(Array("question".utf8))
        #expect(received.wait(for: 1))

        let started = ContinuousClock.now
        let finished = Self.shutDownInBackground(group, timeout: .seconds(10))

        // The answer still arrives, then the server closes.
        #expect(try client.readToEOF() == Array("answer".utf8))
        #expect(finished.wait(timeout: .now() + 10) == .success)
        // It waited for the work but not for the full deadline.
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(throws: IOError.self) { _ = try RawClient(port: port) }
    }

    /// Ignores shutdown requests.
    final class StubbornHandler: ConnectionHandler {
        let received: Collector<Bool>
        init(received: Collector<Bool>) { self.received = received }
        func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) { received.add(true) }
        func connectionShutdownRequested(_ connection: Connection) {}
    }

    /// Runs `shutdownGracefully` on a thread of its own (it blocks); the semaphore is signalled when it returns.
    static func shutDownInBackground(_ group: EventLoopGroup, timeout: Duration) -> DispatchSemaphore {
        let finished = DispatchSemaphore(value: 0)
        Thread {
            group.shutdownGracefully(timeout: timeout)
            finished.signal()
        }.start()
        return finished
    }

    /// A one-loop group with one client connected to a `StubbornHandler` that has received a byte.
    private func stubbornConnection() throws -> (EventLoopGroup, RawClient) {
        let received = Collector<Bool>()
        let group = try EventLoopGroup(loopCount: 1)
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in StubbornHandler(received: received) }
        let client = try RawClient(port: listener.port)
        try client.send([1])
        #expect(received.wait(for: 1))
        return (group, client)
    }

    @Test("cutShutdownShort, during the wait or before it, closes what is left without waiting for the deadline",
          arguments: [false, true])
    func cutShortClosesAtOnce(cutFirst: Bool) throws {
        let (group, client) = try stubbornConnection()
        if cutFirst { group.cutShutdownShort() }
        let started = ContinuousClock.now
        let finished = Self.shutDownInBackground(group, timeout: .seconds(30))
        if !cutFirst {
            Thread.sleep(forTimeInterval: 0.2)
            group.cutShutdownShort()
        }
        #expect(finished.wait(timeout: .now() + 20) == .success)
        #expect(ContinuousClock.now - started < .seconds(15))
        #expect(try client.readToEOF() == [])
    }

    @Test func connectionsThatDoNotFinishAreClosedAtTheDeadline() throws {
        let (group, client) = try stubbornConnection()
        let started = ContinuousClock.now
        group.shutdownGracefully(timeout: .milliseconds(300))
        let elapsed = ContinuousClock.now - started
        #expect(elapsed >= .milliseconds(250))
        #expect(elapsed < .seconds(5))
        #expect(try client.readToEOF() == [])
    }

    @Test func signalSourceCallsBackWithoutExiting() throws {
        let seen = Collector<Int32>()
        let signals = ShutdownSignals(signals: [SIGUSR2]) { seen.add($0) }
        defer { signals.cancel() }
        // In effect as soon as init returns: the first signal is not lost (with Dispatch's signal sources, it was).
        kill(getpid(), SIGUSR2)
        #expect(seen.wait(for: 1, seconds: 5))
        kill(getpid(), SIGUSR2)
        #expect(seen.wait(for: 1, seconds: 5))
        #expect(seen.values == [SIGUSR2, SIGUSR2])
    }
}
