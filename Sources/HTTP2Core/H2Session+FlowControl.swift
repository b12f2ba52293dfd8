internal import CNghttp2

extension H2Session {
    /// Tells the peer that `count` bytes of `.data` received on `streamID` were really taken by the other side,
    /// opening the stream and connection windows again (WINDOW_UPDATE goes out with `pendingOutput()`).
    ///
    /// Until bytes are consumed they count against the windows, which is how a slow reader slows the sender
    /// down. Consuming more than was received, or for a stream that already closed, does nothing: at close the
    /// session returns a stream's unconsumed bytes to the connection window by itself.
    public func consume(streamID: Int32, count: Int) {
        guard let session, count > 0, let pending = unconsumed[streamID] else { return }
        let n = min(count, pending)
        unconsumed[streamID] = pending - n
        nghttp2_session_consume(session, streamID, n)
    }

    /// Received bytes on `streamID` not yet passed to `consume(streamID:count:)`.
    public func unconsumedBytes(streamID: Int32) -> Int { unconsumed[streamID] ?? 0 }

    /// Body bytes queued with `sendData` and not yet handed to nghttp2 (the proxy's send-side backpressure).
    public func outboundQueuedBytes(streamID: Int32) -> Int { outbound[streamID]?.count ?? 0 }

    /// Body bytes queued on all streams together and not yet handed to nghttp2.
    public var outboundQueuedBytesTotal: Int { outbound.values.reduce(0) { $0 + $1.count } }

    /// How many body bytes the peer currently lets us send on `streamID` (stream and connection window), or
    /// `nil` if the stream is unknown.
    public func sendWindow(streamID: Int32) -> Int? {
        guard let session else { return nil }
        let stream = nghttp2_session_get_stream_remote_window_size(session, streamID)
        guard stream >= 0 else { return nil }
        return Int(min(stream, nghttp2_session_get_remote_window_size(session)))
    }
}
