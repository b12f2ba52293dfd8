/// What a header block is, as far as the connection state tells.
public enum H2HeadersCategory: Sendable, Hashable {
    /// The request head that opens a stream (server role).
    case request
    /// A response head, final or informational (1xx) (client role).
    case response
    /// Trailing fields after the body.
    case trailers
    /// A pushed response (only if the peer ignores SETTINGS_ENABLE_PUSH = 0, which nghttp2 rejects).
    case push
}

/// Something the peer did, reported by `H2Session.receive(_:)` in wire order.
public enum H2Event: Sendable, Equatable {
    /// A complete header block (HEADERS plus any CONTINUATION frames).
    case headers(streamID: Int32, fields: [H2Header], category: H2HeadersCategory, endStream: Bool)
    /// Body bytes. Call `H2Session.consume(streamID:count:)` once the bytes have really been taken by the other
    /// side; until then they keep counting against the flow-control windows and slow the peer down.
    /// `endStream` is set on the event that ends the body; it may carry no bytes.
    case data(streamID: Int32, bytes: [UInt8], endStream: Bool)
    /// The stream is fully closed; `errorCode` is `.noError` for a normal end, or the RST_STREAM code.
    case streamClosed(streamID: Int32, errorCode: H2ErrorCode)
    /// The peer reset the stream.
    case rstStream(streamID: Int32, errorCode: H2ErrorCode)
    /// The peer is shutting down: streams above `lastStreamID` were not processed and may be retried elsewhere.
    case goAway(lastStreamID: Int32, errorCode: H2ErrorCode, debugData: [UInt8])
    /// A SETTINGS frame: the peer's values, or the acknowledgement of ours (`ack` with no parameters).
    case settings(ack: Bool, parameters: [H2Setting])
    /// The peer opened a send window (`streamID` 0 is the connection window).
    case windowUpdate(streamID: Int32, increment: Int32)
    /// A PING frame (nghttp2 answers non-ACK pings by itself); `payload` is its 8 bytes.
    case ping(ack: Bool, payload: [UInt8])
}

/// The state of one stream (RFC 9113 §5.1).
public enum H2StreamState: Sendable, Hashable {
    /// Not yet used.
    case idle
    /// Both sides may send.
    case open
    /// Promised by us (server push; unused by the proxy).
    case reservedLocal
    /// Promised by the peer (server push; refused by the proxy).
    case reservedRemote
    /// We sent END_STREAM; the peer may still send.
    case halfClosedLocal
    /// The peer sent END_STREAM; we may still send.
    case halfClosedRemote
    /// Both directions ended or the stream was reset.
    case closed
}

/// Which side of the connection a session plays.
public enum H2Role: Sendable, Hashable {
    /// We accept requests: the session faces a proxy client.
    case server
    /// We send requests: the session faces an upstream server.
    case client
}
