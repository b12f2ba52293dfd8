import ATSPolicy

// Theory of operation: the deadlines of an HTTP/2 client's requests (H2Relay, H2ToH1Relay, through their
// H2StreamBook), the same limits an HTTP/1.1 client has (ProxySession+Deadlines), kept per stream since one
// connection carries many requests:
//
// - the request head: a header block (HEADERS and its CONTINUATIONs) must be complete within `--client-timeout` of
//   its first frame; nothing else may cross the connection meanwhile, so a stalled block ends the connection;
// - the request body, as an inactivity limit: no DATA for `--client-timeout` while the client could send (the
//   proxy has credited what it received: a stream waiting for a lane or for the upstream's window is not the
//   client's fault, and its clock starts again when the proxy lets it send);
// - the response: from the request's end to the response head, `--response-timeout`: 504 with the app's -1001.
//
// While the proxy stops reading the whole client connection because an upstream's or a lane's write buffer is full
// (`ExchangeRelay.clientReadingHeld`), every stream's DATA and any header block wait unread in the socket: that is
// the proxy's backpressure, not the client's delay, so no request-body or header-block deadline applies (response
// deadlines still do). When reading resumes, each open stream's body clock and an assembling block's clock restart.
//
// A stalled request is reset (RST_STREAM CANCEL) and its upstream request cancelled (RST_STREAM upstream, or its
// lane closed), whatever else the connection does: a client's PINGs keep the connection, not its streams. The relay
// says when the earliest deadline falls (`nextStreamDeadline`); the session keeps one timer for it
// (`ProxyTimer.streamDeadlines`) and calls `streamDeadlinesPassed` when it fires, which ends what is due and leaves
// the rest for the next timer.

/// The limits of an h2 client's requests, in seconds of the session's clock.
struct StreamDeadlineLimits {
    /// `--client-timeout`: a header block's completion, and the request body's inactivity.
    var client: Double
    /// `--response-timeout`: from the request's end to the response head.
    var response: Double

    init(_ timeouts: ProxyEnvironment.Timeouts = .init()) {
        client = timeouts.client.seconds
        response = timeouts.response.seconds
    }

    /// The earliest deadline of a connection: its header block's, and each stream's (its clock, and whether the
    /// proxy holds back its body). While `clientReadingHeld`, only response deadlines run.
    func earliest(
        headerBlock: HeaderBlockClock, _ streams: some Sequence<(StreamClock, Bool)>, clientReadingHeld: Bool
    ) -> Double? {
        var earliest = clientReadingHeld ? nil : headerBlock.due(self)
        for (clock, held) in streams {
            guard let due = clock.due(self, bodyHeldByProxy: held || clientReadingHeld) else { continue }
            earliest = min(earliest ?? due.at, due.at)
        }
        return earliest
    }
}

/// What one stream's deadline waits for.
enum StreamStall: Equatable {
    /// The client sends no byte of its request body.
    case requestBody
    /// The upstream sends no response head.
    case response
}

/// The clock of one request stream.
struct StreamClock {
    /// When the request body last made progress: the stream's opening, its last DATA, or the moment the proxy let
    /// the client send again.
    var lastRequestProgress: Double
    /// When the whole request went upstream (or, for an extended CONNECT, its head): the response's wait starts.
    var requestSent: Double?
    /// The request body ended (no body deadline any more).
    var requestEnded = false
    /// The response head went to the client (no response deadline any more).
    var responseStarted = false

    init(opened: Double) { lastRequestProgress = opened }

    /// A request the proxy answers itself: nothing is waited for.
    static func answered(at time: Double) -> StreamClock {
        var clock = StreamClock(opened: time)
        clock.requestEnded = true
        clock.responseStarted = true
        return clock
    }

    /// The request body ended (END_STREAM or trailers): the response's wait starts.
    mutating func requestEnded(at time: Double) {
        requestEnded = true
        if requestSent == nil { requestSent = time }
    }

    /// When this stream's next deadline falls and what it waits for; `bodyHeldByProxy` says the proxy holds
    /// back the client's window (no body deadline then).
    func due(_ limits: StreamDeadlineLimits, bodyHeldByProxy: Bool) -> (at: Double, stall: StreamStall)? {
        if !responseStarted, let sent = requestSent { return (sent + limits.response, .response) }
        if !requestEnded, !bodyHeldByProxy { return (lastRequestProgress + limits.client, .requestBody) }
        return nil
    }
}

/// The start of the header block a client is sending, for the head's deadline.
struct HeaderBlockClock {
    private(set) var since: Double?

    /// Notes, after the client's bytes were read, whether a header block is still incomplete.
    mutating func update(assembling: Bool, now: Double) {
        since = assembling ? (since ?? now) : nil
    }

    func due(_ limits: StreamDeadlineLimits) -> Double? { since.map { $0 + limits.client } }

    /// The proxy reads the client again after holding it: a block still assembling gets its full limit from now.
    mutating func restart(at time: Double) {
        if since != nil { since = time }
    }
}

extension Duration {
    /// The duration in seconds, as the session's clock counts.
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) * 1e-18
    }
}

/// The 504 an h2 stream gets when its upstream sent no response head in time: the X-ATS-* fields and text of the
/// proxy's other local answers, with the stream's URL.
func streamTimeoutAnswer(_ answer: ATSAnswer, url: String) -> (headers: [(String, String)], body: [UInt8]) {
    var answer = answer
    answer.url = url
    return ([("content-type", "text/plain; charset=utf-8")] + answer.headers.map { ($0.0.lowercased(), $0.1) },
            Array(answer.blockBody.utf8))
}
