extension EventLoop {
    /// Starts an outbound connection on this loop (numeric address; resolve names off-loop first). The outcome
    /// arrives at `handler` as `connectionOpened` or `connectionClosed(error:)` (ECONNREFUSED, ETIMEDOUT after
    /// `timeout`, …). Bytes written before it opens are sent once it does. Loop thread only.
    public func connect(
        to address: SocketAddress, timeout: Duration = .seconds(10), handler: any ConnectionHandler
    ) -> Connection {
        Connection.connect(to: address, on: self, timeout: timeout, handler: handler)
    }
}
