internal import CNghttp2

/// One HTTP/2 connection endpoint over nghttp2, without I/O (sans-io).
///
/// Theory of operation (rules from nghttp2's programmer's guide, house-style §2):
/// - Bytes from the socket go into `receive(_:)`, which runs `nghttp2_session_mem_recv`. nghttp2's callbacks only
///   append `H2Event`s to an array and return; the array is handed back after `mem_recv` returns.
/// - Bytes for the socket come out of `pendingOutput()`, which runs `nghttp2_session_mem_send` until it has
///   nothing more. `mem_recv`/`mem_send` are never called from inside a callback (guarded by `isInsideLibrary`).
/// - The application (this class) submits our SETTINGS frame for the connection preface when it is created.
/// - Received DATA is not acknowledged automatically: `consume(streamID:count:)` opens the windows again only
///   when the other leg has really taken the bytes, so a slow reader slows the sender down.
/// - Outbound bodies are queued per stream (`sendData`) and pulled by a data provider that reports DEFERRED
///   while the queue is empty; new bytes resume it.
///
/// Confinement: a session is used by one thread at a time (nghttp2's rule) and is deliberately not `Sendable`.
public final class H2Session {
    /// Which side of the connection this session plays.
    public let role: H2Role
    /// The settings we advertised.
    public let localSettings: H2Settings

    /// The nghttp2_session; nil only if creation failed part-way.
    var session: OpaquePointer?
    /// Events collected by callbacks, returned by the next `receive(_:)` or `takeEvents()`.
    var events: [H2Event] = []
    /// Bytes produced by `mem_send` and not yet returned by `pendingOutput()`.
    var output: [UInt8] = []
    /// True while nghttp2 runs (mem_recv/mem_send); nghttp2 forbids re-entering them from callbacks.
    var isInsideLibrary = false
    /// Header blocks being assembled, by stream.
    var headerBlocks: [Int32: PendingHeaderBlock] = [:]
    /// Outbound bodies, by stream; present while the stream's body is still being sent.
    var outbound: [Int32: H2OutboundStream] = [:]
    /// Received DATA bytes not yet consumed by the application, by stream.
    var unconsumed: [Int32: Int] = [:]
    /// Streams opened and not yet closed.
    var activeStreams: Set<Int32> = []
    /// The connection failure once it happened; every later `receive` throws it again.
    var failure: H2Error?
    /// A failure reason a callback found before nghttp2 queued its GOAWAY (more precise than the code).
    var pendingFailureKind: H2ConnectionFailure?
    /// GOAWAY frames submitted through `submitGoAway`; those are not peer failures.
    var localGoAwaysPending = 0
    /// Whether a GOAWAY arrived from the peer.
    public internal(set) var goAwayReceived = false
    /// The peer's resets of open streams, and the resets the peer's frames made us send (server role); replaces
    /// nghttp2's limiter, which counts every reset the peer sends and none of ours.
    var resetLimit = H2ResetRateLimit()
    /// Streams the application reset for its own reasons (`submitRSTStream` without `blamingPeer`): their
    /// RST_STREAM is not held against the peer. Every other RST_STREAM we send answers the peer's frames.
    var applicationResets: Set<Int32> = []
    /// Streams (client role) whose response header block exceeded our limit: reset alone, not the connection.
    var oversizedHeaderBlocks: Set<Int32> = []

    /// Creates a session and queues our SETTINGS frame (and, for clients, the connection preface).
    ///
    /// - Throws: `H2Error.invalidUse` for settings outside the RFC's ranges, `H2Error.library` if nghttp2 fails.
    public init(role: H2Role, settings: H2Settings = H2Settings()) throws(H2Error) {
        self.role = role
        self.localSettings = settings
        guard (16_384...16_777_215).contains(settings.maxFrameSize) else {
            throw .invalidUse("maxFrameSize \(settings.maxFrameSize) is outside 16384...16777215")
        }
        guard settings.initialWindowSize <= UInt32(Int32.max), settings.connectionWindowSize <= UInt32(Int32.max)
        else { throw .invalidUse("window sizes must not exceed 2^31-1") }

        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw .library(code: NGHTTP2_ERR_NOMEM.rawValue, message: "nghttp2_session_callbacks_new failed")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        H2Session.installCallbacks(callbacks)

        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else {
            throw .library(code: NGHTTP2_ERR_NOMEM.rawValue, message: "nghttp2_option_new failed")
        }
        defer { nghttp2_option_del(option) }
        nghttp2_option_set_no_auto_window_update(option, 1)
        // nghttp2's rapid-reset limiter also counts resets of streams that already completed, which busy clients
        // send in normal use; `resetLimit` counts only resets of open streams instead (see H2ResetRateLimit).
        // The maximum burst and rate never run out: nghttp2 refills its bucket to the burst each second.
        if role == .server { nghttp2_option_set_stream_reset_rate_limit(option, UInt64.max, UInt64.max) }

        // Unretained: this object owns the nghttp2_session and deletes it in deinit, so it outlives every callback.
        let userData = Unmanaged.passUnretained(self).toOpaque()
        var created: OpaquePointer?
        let rv =
            role == .server
            ? nghttp2_session_server_new2(&created, callbacks, userData, option)
            : nghttp2_session_client_new2(&created, callbacks, userData, option)
        guard rv == 0, let created else { throw H2Session.libraryError(rv, "session_new") }
        session = created

        try submitLocalSettings(settings, on: created)
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    private func submitLocalSettings(_ settings: H2Settings, on session: OpaquePointer) throws(H2Error) {
        func entry(_ id: nghttp2_settings_id, _ value: UInt32) -> nghttp2_settings_entry {
            nghttp2_settings_entry(settings_id: Int32(id.rawValue), value: value)
        }
        var entries = [
            entry(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, settings.maxConcurrentStreams),
            entry(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, settings.initialWindowSize),
            entry(NGHTTP2_SETTINGS_MAX_FRAME_SIZE, settings.maxFrameSize),
            entry(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, settings.maxHeaderListSize),
            entry(NGHTTP2_SETTINGS_ENABLE_PUSH, 0),
        ]
        if settings.enableConnectProtocol { entries.append(entry(NGHTTP2_SETTINGS_ENABLE_CONNECT_PROTOCOL, 1)) }
        let rv = entries.withUnsafeMutableBufferPointer {
            nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), $0.baseAddress, $0.count)
        }
        guard rv == 0 else { throw H2Session.libraryError(rv, "submit_settings") }
        if settings.connectionWindowSize > 65_535 {
            let rv = nghttp2_session_set_local_window_size(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(settings.connectionWindowSize))
            guard rv == 0 else { throw H2Session.libraryError(rv, "set_local_window_size") }
        }
    }

    /// Feeds bytes read from the peer and returns what the peer did, in order.
    ///
    /// Also returns events raised while output was produced since the last call (for example a stream that
    /// closed when our final DATA frame went out).
    /// - Throws: `H2Error.connection` when the input ends the connection (bad preface, protocol error, …). A GOAWAY
    ///   is then queued in `pendingOutput()`; events of the failed call are dropped because every stream is dead.
    public func receive(_ bytes: some Collection<UInt8>) throws(H2Error) -> [H2Event] {
        if let failure { throw failure }
        guard let session else { throw H2Error.invalidUse("session was not created") }
        precondition(!isInsideLibrary, "H2Session.receive called from inside an nghttp2 callback")

        let rv: Int =
            bytes.withContiguousStorageIfAvailable { feed(session, UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes { feed(session, $0) }
        if rv < 0 {
            let code = Int32(truncatingIfNeeded: rv)
            let kind: H2ConnectionFailure
            let wireCode: H2ErrorCode
            switch code {
            case NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue: (kind, wireCode) = (.badPreface, .protocolError)
            case NGHTTP2_ERR_FLOODED.rawValue: (kind, wireCode) = (.excessiveLoad, .enhanceYourCalm)
            default: (kind, wireCode) = (.other, .internalError)
            }
            // A fatal mem_recv error queues nothing by itself; send GOAWAY so the peer learns why.
            nghttp2_session_terminate_session(session, wireCode.rawValue)
            failure = .connection(kind, code: wireCode)
        }
        // Pump now: nghttp2 reports a connection error only by queueing GOAWAY, which `frameSent` sees.
        produceOutput()
        if let failure {
            events.removeAll()
            throw failure
        }
        return takeEvents()
    }

    private func feed(_ session: OpaquePointer, _ buffer: UnsafeRawBufferPointer) -> Int {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
        isInsideLibrary = true
        defer { isInsideLibrary = false }
        return nghttp2_session_mem_recv(session, base.assumingMemoryBound(to: UInt8.self), buffer.count)
    }

    /// Returns every byte that should now be written to the peer (possibly none).
    public func pendingOutput() -> [UInt8] {
        produceOutput()
        defer { output.removeAll(keepingCapacity: true) }
        return output
    }

    /// Returns and clears events raised outside `receive(_:)`, e.g. stream closes caused by our own output.
    public func takeEvents() -> [H2Event] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    /// Runs `mem_send` until nghttp2 has nothing more to write, appending to `output`.
    func produceOutput() {
        guard let session else { return }
        precondition(!isInsideLibrary, "H2Session output pumped from inside an nghttp2 callback")
        isInsideLibrary = true
        defer { isInsideLibrary = false }
        while true {
            var chunk: UnsafePointer<UInt8>?
            let n = nghttp2_session_mem_send(session, &chunk)
            if n < 0 {
                if failure == nil { failure = H2Session.libraryError(Int32(truncatingIfNeeded: n), "mem_send") }
                return
            }
            guard n > 0, let chunk else { return }
            // The chunk is valid only until the next mem_send call: copy it now.
            output.append(contentsOf: UnsafeBufferPointer(start: chunk, count: n))
        }
    }

    /// Seconds on a monotonic clock, for rate limits.
    static func monotonicSeconds() -> Double {
        let elapsed = ContinuousClock.now - clockOrigin
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
    }

    private static let clockOrigin = ContinuousClock.now

    static func libraryError(_ code: Int32, _ call: String) -> H2Error {
        .library(code: code, message: "nghttp2_\(call): \(String(cString: nghttp2_strerror(code)))")
    }
}

/// Not Sendable: an nghttp2 session must be confined to one thread.
@available(*, unavailable)
extension H2Session: Sendable {}

/// A header block being assembled from HEADERS + CONTINUATION callbacks.
struct PendingHeaderBlock {
    var category: H2HeadersCategory
    var fields: [H2Header] = []
    /// Size by the SETTINGS_MAX_HEADER_LIST_SIZE rule: name + value + 32 per field.
    var size = 0
}
