internal import CNghttp2
import HTTP1Core

// nghttp2 callbacks. Each is a non-capturing closure (a C function pointer) that recovers the session from
// user data and only records what happened; none calls mem_recv/mem_send (nghttp2 forbids it).

extension H2Session {
    /// Recovers the session passed as user data (unretained: the session owns the nghttp2_session).
    static func from(_ userData: UnsafeMutableRawPointer?) -> H2Session? {
        guard let userData else { return nil }
        return Unmanaged<H2Session>.fromOpaque(userData).takeUnretainedValue()
    }

    static func installCallbacks(_ callbacks: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, userData in
            guard let owner = H2Session.from(userData), let frame else { return 0 }
            owner.beginHeaders(frame.pointee)
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) {
            _, frame, name, nameLength, value, valueLength, _, userData in
            guard let owner = H2Session.from(userData), let frame, let name, let value else { return 0 }
            return owner.header(
                frame.pointee, name: UnsafeBufferPointer(start: name, count: nameLength),
                value: UnsafeBufferPointer(start: value, count: valueLength))
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            guard let owner = H2Session.from(userData), let frame else { return 0 }
            owner.frameReceived(frame.pointee)
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) {
            _, _, streamID, data, length, userData in
            guard let owner = H2Session.from(userData), let data else { return 0 }
            owner.dataChunk(streamID: streamID, UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, errorCode, userData in
            H2Session.from(userData)?.streamClosed(streamID: streamID, errorCode: errorCode)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(callbacks) { _, frame, userData in
            guard let owner = H2Session.from(userData), let frame else { return 0 }
            owner.frameSent(frame.pointee)
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks) { _, frame, _, userData in
            guard let owner = H2Session.from(userData), let frame else { return 0 }
            owner.frameNotSent(frame.pointee)
            return 0
        }
    }

    // MARK: - Receiving

    func beginHeaders(_ frame: nghttp2_frame) {
        let streamID = frame.hd.stream_id
        let category: H2HeadersCategory
        switch frame.headers.cat {
        case NGHTTP2_HCAT_REQUEST:
            category = .request
            activeStreams.insert(streamID)
        case NGHTTP2_HCAT_RESPONSE: category = .response
        case NGHTTP2_HCAT_PUSH_RESPONSE: category = .push
        default:
            // NGHTTP2_HCAT_HEADERS: trailers, or a final response after a 1xx; decided when `:status` shows up.
            category = .trailers
        }
        headerBlocks[streamID] = PendingHeaderBlock(category: category)
    }

    func header(_ frame: nghttp2_frame, name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>)
        -> Int32
    {
        let streamID = frame.hd.stream_id
        // The block is changed where it lies: a copy taken out of the dictionary would share its field list, and
        // appending to it would copy every field so far, for each field (quadratic in a block's field count).
        guard let index = headerBlocks.index(forKey: streamID) else { return 0 }
        headerBlocks.values[index].size += name.count + value.count + 32
        if headerBlocks.values[index].size > Int(localSettings.maxHeaderListSize) {
            headerBlocks[streamID] = nil
            if role == .client {
                // A response head above our limit costs its stream only (the other requests on the connection are
                // the client's too): nghttp2 resets the stream with INTERNAL_ERROR and still decodes the rest of
                // the block, so HPACK stays in step. The close event then tells why (`takeOversizedHeaderBlock`).
                oversizedHeaderBlocks.insert(streamID)
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
            }
            // A request above the limit we advertised: a connection error (choice and source:
            // H2ConnectionFailure.headerListTooLarge).
            if pendingFailureKind == nil, let session {
                pendingFailureKind = .headerListTooLarge
                nghttp2_session_terminate_session(session, H2ErrorCode.enhanceYourCalm.rawValue)
            }
            // Stops delivery of the rest of this block.
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        // Values are bytes: one that is not UTF-8 is kept losslessly (FieldBytes), not replaced with U+FFFD.
        let field = H2Header(String(decoding: name, as: UTF8.self), FieldBytes.string(value))
        if headerBlocks.values[index].category == .trailers && field.name == ":status" {
            headerBlocks.values[index].category = .response
        }
        headerBlocks.values[index].fields.append(field)
        return 0
    }

    func frameReceived(_ frame: nghttp2_frame) {
        let streamID = frame.hd.stream_id
        let endStream = frame.hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(frame.hd.type) {
        case NGHTTP2_DATA.rawValue:
            guard endStream else { return }
            // Chunks were reported as they arrived; mark the last one of this stream as the end.
            if case .data(let id, let bytes, false)? = events.last, id == streamID {
                events[events.count - 1] = .data(streamID: id, bytes: bytes, endStream: true)
            } else {
                events.append(.data(streamID: streamID, bytes: [], endStream: true))
            }
        case NGHTTP2_HEADERS.rawValue:
            guard let block = headerBlocks.removeValue(forKey: streamID) else { return }
            events.append(
                .headers(streamID: streamID, fields: block.fields, category: block.category, endStream: endStream))
        case NGHTTP2_RST_STREAM.rawValue:
            // Called before nghttp2 closes the stream: `activeStreams` still says whether it was open.
            if role == .server, activeStreams.contains(streamID),
                !resetLimit.allowReset(at: H2Session.monotonicSeconds())
            {
                excessiveResets()
            }
            events.append(.rstStream(streamID: streamID, errorCode: H2ErrorCode(rawValue: frame.rst_stream.error_code)))
        case NGHTTP2_SETTINGS.rawValue:
            let ack = frame.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
            var parameters: [H2Setting] = []
            if let iv = frame.settings.iv {
                for entry in UnsafeBufferPointer(start: iv, count: frame.settings.niv) {
                    parameters.append(H2Setting(identifier: UInt16(truncatingIfNeeded: entry.settings_id), value: entry.value))
                }
            }
            events.append(.settings(ack: ack, parameters: parameters))
        case NGHTTP2_PING.rawValue:
            let ack = frame.hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0
            let payload = withUnsafeBytes(of: frame.ping.opaque_data) { Array($0) }
            events.append(.ping(ack: ack, payload: payload))
        case NGHTTP2_GOAWAY.rawValue:
            goAwayReceived = true
            let debug: [UInt8] =
                frame.goaway.opaque_data.map { Array(UnsafeBufferPointer(start: $0, count: frame.goaway.opaque_data_len)) }
                ?? []
            events.append(
                .goAway(
                    lastStreamID: frame.goaway.last_stream_id,
                    errorCode: H2ErrorCode(rawValue: frame.goaway.error_code), debugData: debug))
        case NGHTTP2_WINDOW_UPDATE.rawValue:
            events.append(.windowUpdate(streamID: streamID, increment: frame.window_update.window_size_increment))
        default:
            return
        }
    }

    /// The peer cancelled more open streams than `resetLimit` allows (rapid reset), or made us reset that many
    /// (MadeYouReset): GOAWAY ENHANCE_YOUR_CALM, the RFC 9113 §7 code for excessive load; nghttp2's own limiter would
    /// have said INTERNAL_ERROR.
    private func excessiveResets() {
        guard pendingFailureKind == nil, let session else { return }
        pendingFailureKind = .excessiveLoad
        nghttp2_session_terminate_session(session, H2ErrorCode.enhanceYourCalm.rawValue)
    }

    func dataChunk(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        unconsumed[streamID, default: 0] += bytes.count
        events.append(.data(streamID: streamID, bytes: Array(bytes), endStream: false))
    }

    func streamClosed(streamID: Int32, errorCode: UInt32) {
        outbound[streamID] = nil
        headerBlocks[streamID] = nil
        activeStreams.remove(streamID)
        applicationResets.remove(streamID)
        // Bytes the application never consumed would otherwise shrink the connection window for good.
        if let leftover = unconsumed.removeValue(forKey: streamID), leftover > 0, let session {
            nghttp2_session_consume_connection(session, leftover)
        }
        events.append(.streamClosed(streamID: streamID, errorCode: H2ErrorCode(rawValue: errorCode)))
    }

    // MARK: - Sending

    func frameSent(_ frame: nghttp2_frame) {
        if UInt32(frame.hd.type) == NGHTTP2_RST_STREAM.rawValue {
            ourResetSent(streamID: frame.hd.stream_id)
            return
        }
        guard UInt32(frame.hd.type) == NGHTTP2_GOAWAY.rawValue else { return }
        if localGoAwaysPending > 0 {
            localGoAwaysPending -= 1
            return
        }
        // nghttp2 terminated the session itself: the peer's input was at fault.
        let code = H2ErrorCode(rawValue: frame.goaway.error_code)
        guard failure == nil, code != .noError else { return }
        let kind: H2ConnectionFailure
        if let pendingFailureKind {
            kind = pendingFailureKind
        } else {
            switch code {
            case .protocolError: kind = .protocolError
            case .flowControlError: kind = .flowControlError
            case .compressionError: kind = .compressionError
            case .frameSizeError: kind = .frameSizeError
            case .enhanceYourCalm: kind = .excessiveLoad
            default: kind = .other
            }
        }
        failure = .connection(kind, code: code)
    }

    /// A RST_STREAM we sent (server role): unless the application reset the stream for its own reasons, the peer's
    /// frames caused it (a WINDOW_UPDATE overflow, DATA past the window or on a closed stream, a malformed request)
    /// and it takes a token from the same bucket as the peer's own resets. Else a client could make the proxy start
    /// and abandon work without limit by provoking resets instead of sending them (MadeYouReset, CVE-2025-8671).
    private func ourResetSent(streamID: Int32) {
        guard role == .server, applicationResets.remove(streamID) == nil else { return }
        if !resetLimit.allowReset(at: H2Session.monotonicSeconds()) { excessiveResets() }
    }

    func frameNotSent(_ frame: nghttp2_frame) {
        // A request that could not start (GOAWAY arrived first, or no stream IDs left): the stream never
        // opened, so nghttp2 reports no close. Report it as refused so the caller may retry elsewhere.
        guard UInt32(frame.hd.type) == NGHTTP2_HEADERS.rawValue, frame.headers.cat == NGHTTP2_HCAT_REQUEST else {
            return
        }
        let streamID = frame.hd.stream_id
        guard activeStreams.remove(streamID) != nil else { return }
        outbound[streamID] = nil
        events.append(.streamClosed(streamID: streamID, errorCode: .refusedStream))
    }
}
