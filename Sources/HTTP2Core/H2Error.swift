/// Everything an `H2Session` call can fail with.
///
/// Connection-scope failures end the whole connection: a GOAWAY with `code` is already queued and comes out of
/// `pendingOutput()`; flush it, then close the socket. Stream-scope failures end one stream only (an RST_STREAM
/// is queued or the stream was already gone); the connection continues.
public enum H2Error: Error, Sendable, Equatable {
    /// The peer broke the protocol badly enough to end the connection; GOAWAY(`code`) is queued.
    case connection(H2ConnectionFailure, code: H2ErrorCode)
    /// The stream is closed, reset or unknown, so the request cannot be carried out on it.
    case stream(id: Int32, code: H2ErrorCode)
    /// No new stream may be opened: a GOAWAY was sent or received, or stream IDs are exhausted.
    case streamsExhausted
    /// The caller asked for something the API does not allow (wrong role, bad argument); nothing was sent.
    case invalidUse(String)
    /// nghttp2 reported an unexpected failure (for instance out of memory).
    case library(code: Int32, message: String)
}

/// Why the connection failed, as far as the wire tells us.
public enum H2ConnectionFailure: Sendable, Equatable {
    /// The client did not open with the HTTP/2 connection preface (RFC 9113 §3.4); often an HTTP/1 client.
    case badPreface
    /// PROTOCOL_ERROR: a frame in the wrong state or with invalid contents.
    case protocolError
    /// FLOW_CONTROL_ERROR: the peer sent more than the window allowed or overflowed a window.
    case flowControlError
    /// COMPRESSION_ERROR: the HPACK block could not be decoded.
    case compressionError
    /// FRAME_SIZE_ERROR: a frame with an invalid length.
    case frameSizeError
    /// A header block larger than the SETTINGS_MAX_HEADER_LIST_SIZE we advertised.
    ///
    /// Choice: RFC 9113 has no error code for this (§10.5.1 leaves the reaction to the endpoint, and nghttp2 1.52
    /// does not enforce the limit on receipt), so the session ends the connection with ENHANCE_YOUR_CALM (§7:
    /// "behavior that might be generating excessive load"): a peer ignoring our advertised limit is misbehaving.
    case headerListTooLarge
    /// The peer flooded us with frames that need replies (nghttp2's flood protection).
    case excessiveLoad
    /// Another GOAWAY error code chosen by nghttp2.
    case other
}
