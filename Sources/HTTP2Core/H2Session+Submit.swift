internal import CNghttp2

/// How the body of a submitted request or response is sent.
public enum H2Body: Sendable, Hashable {
    /// No body: the HEADERS frame carries END_STREAM.
    case none
    /// A body follows through `sendData(streamID:_:endStream:)` (and optionally `submitTrailers`).
    case streaming
}

extension H2Session {
    /// Queues a request on a new stream (client role) and returns its stream ID.
    ///
    /// `headers` must start with the pseudo-headers (`:method`, `:scheme`, `:authority`, `:path`) and use lowercase
    /// names; `H2HeaderTranslation.h2Request(from:scheme:)` builds them from an HTTP/1 head.
    /// - Throws: `.streamsExhausted` after a GOAWAY or when stream IDs ran out; `.invalidUse` in the server role.
    public func submitRequest(_ headers: [H2Header], body: H2Body) throws(H2Error) -> Int32 {
        guard role == .client else { throw .invalidUse("only a client session submits requests") }
        let session = try liveSession()
        guard nghttp2_session_check_request_allowed(session) != 0 else { throw .streamsExhausted }
        var provider = H2Session.dataProvider()
        let rv: Int32 = withNVArray(headers) { nva, count in
            if body == .streaming {
                return nghttp2_submit_request(session, nil, nva, count, &provider, nil)
            }
            return nghttp2_submit_request(session, nil, nva, count, nil, nil)
        }
        guard rv > 0 else {
            if rv == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue { throw .streamsExhausted }
            throw H2Session.libraryError(rv, "submit_request")
        }
        activeStreams.insert(rv)
        if body == .streaming { outbound[rv] = H2OutboundStream() }
        return rv
    }

    /// Queues the response head for a request stream (server role).
    ///
    /// - Throws: `.stream(id:code:)` if the stream is closed or unknown; `.invalidUse` in the client role.
    public func submitResponse(streamID: Int32, headers: [H2Header], body: H2Body) throws(H2Error) {
        guard role == .server else { throw .invalidUse("only a server session submits responses") }
        let session = try liveSession()
        guard nghttp2_session_find_stream(session, streamID) != nil else {
            throw .stream(id: streamID, code: .streamClosed)
        }
        var provider = H2Session.dataProvider()
        let rv: Int32 = withNVArray(headers) { nva, count in
            if body == .streaming {
                return nghttp2_submit_response(session, streamID, nva, count, &provider)
            }
            return nghttp2_submit_response(session, streamID, nva, count, nil)
        }
        guard rv == 0 else { throw H2Session.libraryError(rv, "submit_response") }
        if body == .streaming { outbound[streamID] = H2OutboundStream() }
    }

    /// Queues an informational (1xx) response head or any other non-final HEADERS frame without END_STREAM.
    public func submitInformational(streamID: Int32, headers: [H2Header]) throws(H2Error) {
        let session = try liveSession()
        let rv: Int32 = withNVArray(headers) { nva, count in
            nghttp2_submit_headers(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, nil, nva, count, nil)
        }
        guard rv >= 0 else { throw H2Session.libraryError(rv, "submit_headers") }
    }

    /// Appends body bytes to the stream's outbound queue; `endStream` marks the end of the body.
    ///
    /// The bytes are kept by the session until flow control lets them out (`outboundQueuedBytes(streamID:)` tells
    /// how many wait), so the caller may drop its copy.
    /// - Throws: `.stream(id:code:)` if the stream is closed, was reset, or was submitted with `body: .none`;
    ///   `.invalidUse` if the body already ended.
    public func sendData(streamID: Int32, _ bytes: some Collection<UInt8>, endStream: Bool) throws(H2Error) {
        let session = try liveSession()
        try extendBody(streamID, session: session) { queue in
            queue.append(bytes)
            queue.ended = endStream
        }
    }

    /// Ends the stream's body with trailing header fields (sent after all queued data).
    ///
    /// - Throws: like `sendData(streamID:_:endStream:)`.
    public func submitTrailers(streamID: Int32, _ trailers: [H2Header]) throws(H2Error) {
        let session = try liveSession()
        try extendBody(streamID, session: session) { queue in
            queue.ended = true
            queue.trailers = trailers
        }
    }

    /// Applies `change` to the stream's body queue where it lies in `outbound`, then resumes a deferred provider.
    /// In place on purpose: a copy taken out of the dictionary shares the queue's byte storage, so its first
    /// mutation would copy every queued byte (the whole queue for every piece appended).
    private func extendBody(
        _ streamID: Int32, session: OpaquePointer, _ change: (inout H2OutboundStream) -> Void
    ) throws(H2Error) {
        guard let index = outbound.index(forKey: streamID) else { throw .stream(id: streamID, code: .streamClosed) }
        guard !outbound.values[index].ended else { throw .invalidUse("the body of stream \(streamID) already ended") }
        change(&outbound.values[index])
        let wasDeferred = outbound.values[index].deferred
        outbound.values[index].deferred = false
        if wasDeferred { nghttp2_session_resume_data(session, streamID) }
    }

    /// Resets a stream with `errorCode` (RST_STREAM); queued body bytes are dropped.
    ///
    /// - Parameter blamingPeer: the peer's own frames made the stream unusable (a malformed request): in the server
    ///   role the reset then counts towards the rapid-reset limit, as the resets nghttp2 sends by itself do
    ///   (MadeYouReset, CVE-2025-8671). Resets for the application's reasons (the other leg failed) do not.
    public func submitRSTStream(streamID: Int32, errorCode: H2ErrorCode, blamingPeer: Bool = false) throws(H2Error) {
        let session = try liveSession()
        let rv = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, errorCode.rawValue)
        guard rv == 0 else { throw H2Session.libraryError(rv, "submit_rst_stream") }
        if !blamingPeer { applicationResets.insert(streamID) }
        outbound[streamID] = nil
    }

    /// Queues GOAWAY: streams up to `lastStreamID` still complete, later ones are refused, and no new stream
    /// can be opened by either side afterwards.
    ///
    /// - Parameter lastStreamID: the last peer-initiated stream we will process; `nil` means the last one nghttp2
    ///   has seen, which is the graceful choice.
    public func submitGoAway(
        lastStreamID: Int32? = nil, errorCode: H2ErrorCode = .noError, debugData: [UInt8] = []
    ) throws(H2Error) {
        let session = try liveSession()
        let last = lastStreamID ?? nghttp2_session_get_last_proc_stream_id(session)
        // nghttp2 copies opaque_data during the call.
        let rv = debugData.withUnsafeBufferPointer {
            nghttp2_submit_goaway(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, errorCode.rawValue, $0.baseAddress, $0.count)
        }
        guard rv == 0 else { throw H2Session.libraryError(rv, "submit_goaway") }
        localGoAwaysPending += 1
    }

    /// Queues a PING with an 8-byte payload (the peer echoes it in a PING ACK event).
    public func submitPing(payload: [UInt8] = Array(repeating: 0, count: 8)) throws(H2Error) {
        guard payload.count == 8 else { throw .invalidUse("a PING payload is exactly 8 bytes") }
        let session = try liveSession()
        let rv = payload.withUnsafeBufferPointer {
            nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), $0.baseAddress)
        }
        guard rv == 0 else { throw H2Session.libraryError(rv, "submit_ping") }
    }

    /// The session pointer, or the connection failure that ended it.
    func liveSession() throws(H2Error) -> OpaquePointer {
        if let failure { throw failure }
        guard let session else { throw .invalidUse("session was not created") }
        return session
    }

    /// A data provider with no source pointer: the read callback finds the stream's queue by stream ID, so
    /// nghttp2 never holds a pointer into Swift memory after a submit returns.
    static func dataProvider() -> nghttp2_data_provider {
        nghttp2_data_provider(
            source: nghttp2_data_source(ptr: nil),
            read_callback: { _, streamID, buffer, length, flags, _, userData in
                guard let owner = H2Session.from(userData), let buffer, let flags else {
                    return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
                }
                return owner.readBody(
                    streamID: streamID, into: UnsafeMutableRawBufferPointer(start: buffer, count: length),
                    flags: flags)
            })
    }

    /// Data provider body: copy queued bytes, or DEFERRED while empty, or EOF (+ trailers) when ended.
    func readBody(streamID: Int32, into buffer: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>)
        -> Int
    {
        // A stream without a queue was reset locally; TEMPORAL_CALLBACK_FAILURE makes nghttp2 reset it.
        guard let index = outbound.index(forKey: streamID) else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        // In place, as in `extendBody`: a copy would duplicate the whole queue for every DATA frame.
        let n = outbound.values[index].take(into: buffer)
        if outbound.values[index].count == 0 {
            if outbound.values[index].ended {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                if let trailers = outbound.values[index].trailers, let session {
                    // nghttp2 allows submit_trailer inside the read callback; END_STREAM then rides on them.
                    flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                    let rv = withNVArray(trailers) { nva, count in nghttp2_submit_trailer(session, streamID, nva, count) }
                    if rv != 0 { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
                }
                outbound[streamID] = nil
                return n
            }
            if n == 0 {
                outbound.values[index].deferred = true
                return Int(NGHTTP2_ERR_DEFERRED.rawValue)
            }
        }
        return n
    }
}
