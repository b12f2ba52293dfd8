import Foundation
import ProxyEventLoop
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("ProxyEventLoop idle timeout")
struct IdleTimeoutTests {
    /// Echoes, with a 300 ms idle timeout, and reports how the connection ended.
    final class IdleEcho: ConnectionHandler {
        let closed: Collector<IOError?>
        init(closed: Collector<IOError?>) { self.closed = closed }
        func connectionOpened(_ connection: Connection) { connection.setIdleTimeout(.milliseconds(300)) }
        func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) { connection.write(bytes) }
        func connectionClosed(_ connection: Connection, error: IOError?) { closed.add(error) }
    }

    @Test func activityKeepsTheConnectionAliveAndSilenceClosesIt() throws {
        let closed = Collector<IOError?>()
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in IdleEcho(closed: closed) }
        let client = try RawClient(port: listener.port)
        let started = ContinuousClock.now
        // Active for about 600 ms, twice the timeout, with gaps shorter than it.
        for _ in 0..<6 {
            try client.send([7])
            #expect(try client.receive(exactly: 1) == [7])
            usleep(100_000)
        }
        #expect(closed.values.isEmpty)
        // Then silent: the server closes with an idle timeout error.
        #expect(try client.readToEOF() == [])
        #expect(closed.wait(for: 1))
        #expect(closed.values.first == IOError(errnoCode: ETIMEDOUT, call: "idle timeout"))
        #expect(ContinuousClock.now - started >= .milliseconds(800))
    }
}
