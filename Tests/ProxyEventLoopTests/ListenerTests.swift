import Foundation
import ProxyEventLoop
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Every loop accepts from a listener (EPOLLEXCLUSIVE) and a loop clearly busier than another hands new connections
/// over: these check the parts of that a client can see.
@Suite("Listener accepting on every loop", .serialized)
struct ListenerTests {
    /// Records, on the owning loop, which loop got the connection and the peer address it reports.
    final class Recorder: ConnectionHandler {
        struct Opened: Sendable {
            let loopIndex: Int
            let remote: String?
        }
        let opened: Collector<Opened>
        init(_ opened: Collector<Opened>) { self.opened = opened }
        func connectionOpened(_ connection: Connection) {
            opened.add(Opened(loopIndex: connection.loop.index, remote: connection.remoteAddress?.description))
        }
        func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {}
    }

    /// The client's own address as the server sees it.
    static func localAddress(of fd: Int32) -> String {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return "127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
    }

    @Test func aBurstOfClientsIsSpreadOverBothLoopsAndEachKnowsItsPeer() throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdownGracefully(timeout: .seconds(2)) }
        let opened = Collector<Recorder.Opened>()
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in Recorder(opened) }
        // Connected one after another without waiting for the proxy: a loop that is awake could take them all.
        let clients = try (0..<32).map { _ in try RawClient(port: listener.port) }
        #expect(opened.wait(for: clients.count))
        let values = opened.values
        let perLoop = [0, 1].map { index in values.filter { $0.loopIndex == index }.count }
        #expect(perLoop.allSatisfy { $0 >= 12 }, "connections per loop: \(perLoop)")
        // The peer address kept from accept4 is the client's own.
        #expect(Set(values.compactMap(\.remote)) == Set(clients.map { Self.localAddress(of: $0.fd) }))
    }

    @Test func aClosedListenerLeavesNoSocketAndRefusesClients() throws {
        let group = try EventLoopGroup(loopCount: 2)
        defer { group.shutdownGracefully(timeout: .seconds(2)) }
        let listener = try group.listen(host: "127.0.0.1", port: 0) { _ in EchoHandler() }
        let port = listener.port
        let client = try RawClient(port: port)
        try client.send(Array("ok".utf8))
        #expect(try client.receive(exactly: 2) == Array("ok".utf8))
        listener.close()
        // Only the accepted connection is left on the port: the listening socket was closed by the last loop.
        #expect(try eventually { try openSocketDescriptors(onPort: port) == 2 })
        #expect(throws: IOError(errnoCode: ECONNREFUSED, call: "connect")) { _ = try RawClient(port: port) }
        try client.send(Array("still".utf8))
        #expect(try client.receive(exactly: 5) == Array("still".utf8))
    }
}
