import ProxyEventLoop

/// An outbound client: sends `message`, half-closes, collects everything until the server's FIN, then reports.
final class EchoClientHandler: ConnectionHandler {
    struct Result: Sendable {
        let received: [UInt8]
        let error: IOError?
        let opened: Bool
    }

    private let message: [UInt8]
    private let results: Collector<Result>
    private var received: [UInt8] = []
    private var opened = false

    init(message: [UInt8], results: Collector<Result>) {
        self.message = message
        self.results = results
    }

    func connectionOpened(_ connection: Connection) {
        opened = true
        connection.write(message)
        connection.shutdownWrite()
    }

    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer) {
        received.append(contentsOf: bytes)
    }

    func connectionClosed(_ connection: Connection, error: IOError?) {
        results.add(Result(received: received, error: error, opened: opened))
    }
}
