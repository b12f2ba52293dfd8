/// What ``HTTP1Parser/nextEvent()`` reports, in wire order.
public enum HTTP1Event: Equatable, Sendable {
    /// A complete request head (requests role).
    case requestHead(HTTPRequestHead)
    /// A complete response head (responses role). Interim 1xx responses arrive as separate heads before the final one.
    case responseHead(HTTPResponseHead)
    /// The next piece of the body, already de-chunked. Bodies are streamed, never buffered whole.
    case body([UInt8])
    /// The message is complete; `trailers` holds chunked trailer fields (empty otherwise).
    case end(trailers: HTTPHeaders)
    /// Feed more bytes with ``HTTP1Parser/receive(_:)`` (or the EOF with ``HTTP1Parser/receiveEOF()``).
    case needMoreData
    /// A message has ended; call ``HTTP1Parser/startNextMessage()`` (or ``HTTP1Parser/switchProtocols()``) to go on.
    case paused
    /// The peer closed the connection cleanly between messages.
    case connectionClosed
    /// HTTP/1 is over on this connection (after 101 or a 2xx to CONNECT); these bytes belong to the new protocol.
    case switchedProtocols(leftover: [UInt8])
}
