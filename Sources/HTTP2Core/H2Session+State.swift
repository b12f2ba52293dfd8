internal import CNghttp2

extension H2Session {
    /// Whether the session still expects input. When both this and `wantsWrite` are false, the connection is done
    /// and may be closed (after writing what `pendingOutput()` returned).
    public var wantsRead: Bool {
        guard let session else { return false }
        return nghttp2_session_want_read(session) != 0
    }

    /// Whether output is waiting, in our buffer or inside nghttp2 (queued frames, or data the windows allow).
    public var wantsWrite: Bool {
        guard let session else { return !output.isEmpty }
        return !output.isEmpty || nghttp2_session_want_write(session) != 0
    }

    /// The state of a stream, or `nil` if nghttp2 no longer (or never) knew it.
    public func streamState(_ streamID: Int32) -> H2StreamState? {
        guard let session, let stream = nghttp2_session_find_stream(session, streamID) else { return nil }
        switch nghttp2_stream_get_state(stream) {
        case NGHTTP2_STREAM_STATE_IDLE: return .idle
        case NGHTTP2_STREAM_STATE_OPEN: return .open
        case NGHTTP2_STREAM_STATE_RESERVED_LOCAL: return .reservedLocal
        case NGHTTP2_STREAM_STATE_RESERVED_REMOTE: return .reservedRemote
        case NGHTTP2_STREAM_STATE_HALF_CLOSED_LOCAL: return .halfClosedLocal
        case NGHTTP2_STREAM_STATE_HALF_CLOSED_REMOTE: return .halfClosedRemote
        default: return .closed
        }
    }

    /// Streams opened (by either side) and not yet closed.
    public var activeStreamCount: Int { activeStreams.count }

    /// Whether a new request may be submitted now: no GOAWAY either way, IDs left, and the peer's
    /// SETTINGS_MAX_CONCURRENT_STREAMS not reached (client role; for pooling upstream connections).
    public var canOpenStream: Bool {
        guard let session, failure == nil, role == .client else { return false }
        return nghttp2_session_check_request_allowed(session) != 0
            && UInt32(activeStreams.count) < remoteSettings.maxConcurrentStreams
    }

    /// The peer's settings in force (RFC initial values until its SETTINGS frame arrives).
    public var remoteSettings: H2RemoteSettings {
        func value(_ id: nghttp2_settings_id) -> UInt32 {
            guard let session else { return 0 }
            return nghttp2_session_get_remote_settings(session, id)
        }
        return H2RemoteSettings(
            maxConcurrentStreams: value(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS),
            initialWindowSize: value(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE),
            maxFrameSize: value(NGHTTP2_SETTINGS_MAX_FRAME_SIZE),
            maxHeaderListSize: value(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE),
            enablePush: value(NGHTTP2_SETTINGS_ENABLE_PUSH) != 0,
            enableConnectProtocol: value(NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL) != 0)
    }

    /// Whether the response header block of `streamID` (client role) was refused for exceeding our
    /// SETTINGS_MAX_HEADER_LIST_SIZE, which reset that stream alone; answers once per stream.
    public func takeOversizedHeaderBlock(streamID: Int32) -> Bool {
        oversizedHeaderBlocks.remove(streamID) != nil
    }

    /// Whether a header block from the peer has begun and not ended (HEADERS waiting for its CONTINUATIONs):
    /// until it ends no other frame may cross the connection.
    public var isReceivingHeaderBlock: Bool { !headerBlocks.isEmpty }
}
