import HTTP1Core
import HTTP2Core
import ProxyTrace

// Theory of operation: what a relay of an h2 client (H2Relay, H2ToH1Relay) keeps of the client's streams, whatever
// carries them upstream (an h2 session, or HTTP/1.1 lanes):
//
// - each decided stream's state: what both relays keep of its exchange (H2StreamExchange: its line, its record, its
//   clock) inside the relay's own `Stream`, which says whether the proxy holds back its body; and the streams held
//   for the owner's decision (UndecidedStreams);
// - the deadlines of StreamDeadlines over them: the header block the client is assembling, and each stream's body
//   and response, none of the client's while the adapter holds the client unread (`clientReadingHeld`).
//
// The relays differ in what they do with a stream; what they keep of one, and when it is overdue, is written here once.

/// A decided stream of an h2 client, as its relay keeps it.
protocol H2ClientStream {
    var exchange: H2StreamExchange { get set }
    /// The proxy holds back the stream's body (DATA it has not credited: waiting for the upstream's window or for a
    /// lane), so no body deadline runs.
    var bodyHeldByProxy: Bool { get }
}

/// The client streams of an h2 relay, held and decided, with their deadlines.
struct H2StreamBook<Stream: H2ClientStream> {
    var streams: [Int32: Stream] = [:]
    var undecided = UndecidedStreams()
    let limits: StreamDeadlineLimits
    private var headerBlock = HeaderBlockClock()
    /// The adapter stopped reading the client for a full upstream or lane write buffer (StreamDeadlines).
    private(set) var clientHeld = false

    init(limits: StreamDeadlineLimits) {
        self.limits = limits
    }

    /// No stream is open, decided or not.
    var isEmpty: Bool { streams.isEmpty && undecided.isEmpty }

    /// The highest client stream taken on (decided or not), for a GOAWAY that lets them finish.
    var highestID: Int32 { max(streams.keys.max() ?? 0, undecided.highestID ?? 0) }

    /// Notes, after the client's bytes were read, whether a header block is still incomplete.
    mutating func noteHeaderBlock(assembling: Bool, at time: Double) {
        headerBlock.update(assembling: assembling, now: time)
    }

    /// When the earliest deadline falls; nil when none runs.
    var nextDeadline: Double? {
        limits.earliest(
            headerBlock: headerBlock, streams.values.lazy.map { ($0.exchange.clock, $0.bodyHeldByProxy) },
            clientReadingHeld: clientHeld)
    }

    /// The adapter stopped (`held`) or resumed reading the client. On release every stream's body clock and an
    /// assembling header block's restart at `time`, each with its full limit.
    mutating func clientReadingHeld(_ held: Bool, at time: Double) {
        clientHeld = held
        guard !held else { return }
        headerBlock.restart(at: time)
        var index = streams.startIndex
        while index != streams.endIndex {
            streams.values[index].exchange.clock.lastRequestProgress = time
            streams.formIndex(after: &index)
        }
    }

    /// The header block the client is assembling is overdue at `time` (the connection must go).
    func headerBlockOverdue(at time: Double) -> Bool {
        guard !clientHeld, let due = headerBlock.due(limits) else { return false }
        return due <= time
    }

    /// The streams whose deadline passed at `time`, and what each waited for.
    func overdueStreams(at time: Double) -> [(id: Int32, stall: StreamStall)] {
        var overdue: [(id: Int32, stall: StreamStall)] = []
        for (id, s) in streams {
            guard let due = s.exchange.clock.due(limits, bodyHeldByProxy: s.bodyHeldByProxy || clientHeld), due.at <= time
            else { continue }
            overdue.append((id, due.stall))
        }
        return overdue
    }
}

/// What both h2 relays keep of one client stream's exchange: its line and trace, and its deadlines' clock.
struct H2StreamExchange: ExchangeRecording {
    var method: String
    var url: String
    var outcome: ExchangeSummary.ATSOutcome
    var codes: [ExchangeError]
    /// The `X-ATS-*` fields for the response, in h2 form.
    var annotation: [H2Header]
    var started: Double
    var status: Int?
    var requestBytes = 0
    var responseBytes = 0
    /// The proxy answers the stream itself: its request body is dropped.
    var local = false
    var recorder: ExchangeRecorder?
    /// What the rules stage did to the stream; nil when no rule touched it.
    var rules: ExchangeRules?
    var clock: StreamClock

    /// A stream the owner forwards (its relay records the request as it goes upstream).
    static func forwarded(
        _ head: HTTPRequestHead, url: String, outcome: ExchangeSummary.ATSOutcome, codes: [ExchangeError],
        annotation: [(String, String)], started: Double, now: Double, recording: RecordingOptions?
    ) -> H2StreamExchange {
        var exchange = H2StreamExchange(
            method: head.method, url: url, outcome: outcome, codes: codes,
            annotation: annotation.map { H2Header($0.0.lowercased(), $0.1) }, started: started,
            clock: StreamClock(opened: now))
        exchange.recorder = ExchangeRecorder.make(recording)
        return exchange
    }

    /// A stream the owner answers locally with `response` and `body`.
    static func answered(
        _ head: HTTPRequestHead, with response: HTTPResponseHead, body: [UInt8], url: String,
        outcome: ExchangeSummary.ATSOutcome, codes: [ExchangeError], started: Double, now: Double,
        recording: RecordingOptions?
    ) -> H2StreamExchange {
        var exchange = H2StreamExchange(
            method: head.method, url: url, outcome: outcome, codes: codes, annotation: [], started: started,
            clock: .answered(at: now))
        exchange.recorder = ExchangeRecorder.make(recording)
        exchange.recorder?.recordRequest(head, forwarded: nil)
        exchange.recorder?.recordLocalResponse(response)
        exchange.local = true
        exchange.status = response.status
        exchange.responseBytes = body.count
        return exchange
    }
}
