import Foundation
import ProxyEventLoop
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("ProxyEventLoop quiet notice")
struct QuietNoticeTests {
    /// Echoes; the connection goes quiet after 100 ms without traffic and times out after 3 s.
    final class QuietEcho: ConnectionHandler {
        let quiet: Collector<Int>
        let closed: Collector<IOError?>
        private var echoed = 0
        init(quiet: Collector<Int>, closed: Collector<IOError?>) {
            self.quiet = quiet
            self.closed = closed
        }
        func connectionOpened(_ connection: Connection) {
            connection.setIdleTimeout(.seconds(3))
            connection.setQuietNotice(after: .milliseconds(100))
        }
        func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
            echoed += bytes.count
            connection.write(bytes)
        }
        /// Records how many bytes had been echoed when the notice came.
        func connectionBecameQuiet(_ connection: Connection) { quiet.add(echoed) }
        func connectionClosed(_ connection: Connection, error: IOError?) { closed.add(error) }
    }

    @Test func oneNoticePerQuietPeriodAndTheIdleTimeoutStillCloses() throws {
        let quiet = Collector<Int>()
        let closed = Collector<IOError?>()
        let group = try EventLoopGroup(loopCount: 1)
        defer { group.shutdownGracefully(timeout: .seconds(1)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in QuietEcho(quiet: quiet, closed: closed) }
        let client = try RawClient(port: listener.port)

        try client.send([1])
        #expect(try client.receive(exactly: 1) == [1])
        #expect(quiet.wait(for: 1, seconds: 5))
        // Silence goes on for three more quiet delays: still one notice, not one per delay.
        usleep(300_000)
        #expect(quiet.values == [1])

        // Traffic again, then silence: a second notice, after the second byte, one quiet delay later, not only when
        // the timer armed for the idle timeout comes round (about 2.6 s later).
        try client.send([2])
        #expect(try client.receive(exactly: 1) == [2])
        #expect(quiet.wait(for: 1, seconds: 1.5))
        #expect(quiet.values == [1, 2])

        // The notice does not replace the idle timeout.
        #expect(try client.readToEOF() == [])
        #expect(closed.wait(for: 1))
        #expect(closed.values.first == IOError(errnoCode: ETIMEDOUT, call: "idle timeout"))
        #expect(quiet.values == [1, 2])
    }
}
