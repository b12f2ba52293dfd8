import ATSPolicy
import HTTP1Core
import ProxyTrace

/// What the owner decides for one request (`ExchangeRelay.resolve`).
enum RequestDecision {
    /// Send `head` upstream (to `upstream`, when it names another host than the connected one) and add
    /// `annotation` to the response.
    case forward(
        head: HTTPRequestHead, url: String, upstream: UpstreamTarget?, annotation: [(String, String)],
        outcome: ExchangeSummary.ATSOutcome, codes: [ExchangeError], rules: ExchangeRules? = nil)
    /// Answer locally with this response; the request body is read and dropped.
    case answer(
        head: HTTPResponseHead, body: [UInt8], url: String, outcome: ExchangeSummary.ATSOutcome,
        codes: [ExchangeError], rules: ExchangeRules? = nil)
}

/// The refusal of a request whose absolute-form target names another origin than its tunnel's
/// (`InterceptLayer.originForm`).
struct MisdirectedRequest: Error {
    let decision: RequestDecision
}

/// A host and port to connect to for plain-HTTP forwarding.
struct UpstreamTarget: Equatable {
    var host: String
    var port: Int
}

/// A request head a relay holds until its owner decides what becomes of it (`ExchangeRelay.resolve`). `id` names
/// the exchange within its relay: the number of the head on an HTTP/1 connection, the stream id on an h2 one.
struct DecisionRequest {
    let id: Int
    let head: HTTPRequestHead
}

/// The requests one relay step holds for a decision, in the order they came. Most steps hold none or one (an HTTP/1
/// relay holds one at a time), and those cost no allocation; an h2 step may hold several.
struct DecisionRequests {
    private var first: DecisionRequest?
    private var more: [DecisionRequest] = []
    /// The next of `more` to pop: popping moves an index, not the array's elements (a page load's many heads).
    private var nextOfMore = 0

    /// Whether `first` holds a request, kept beside it: testing a large optional for nil costs an outlined call.
    private var hasFirst = false

    var isEmpty: Bool { !hasFirst }

    mutating func append(_ request: DecisionRequest) {
        if hasFirst { more.append(request) } else { first = request; hasFirst = true }
    }

    mutating func append(contentsOf other: consuming DecisionRequests) {
        while let request = other.popFirst() { append(request) }
    }

    mutating func popFirst() -> DecisionRequest? {
        guard hasFirst else { return nil }
        let request = first.take()
        if nextOfMore < more.count {
            first = more[nextOfMore]
            nextOfMore += 1
        } else {
            hasFirst = false
            if !more.isEmpty { more.removeAll(keepingCapacity: true) }
            nextOfMore = 0
        }
        return request
    }
}

/// Bytes and decisions produced by one relay step.
struct RelayOutput {
    /// Requests whose heads the relay holds until the owner answers each with `ExchangeRelay.resolve`. The relay
    /// holds what follows meanwhile: an HTTP/1 connection's further bytes, an h2 stream's frames (other streams go
    /// on).
    var toDecide = DecisionRequests()
    var toClient: [UInt8] = []
    var toUpstream: [UInt8] = []
    var exchanges: [ExchangeSummary] = []
    /// Connect (or reconnect) the upstream before `toUpstream` can go out; set by plain-HTTP forwarding.
    var connect: UpstreamTarget?
    /// Close the client after `toClient` is flushed (and the upstream with it).
    var closeClient = false
    /// With `closeClient`: a response was cut off after its head went out, so the client's connection ends with a
    /// reset (and no TLS close_notify), never an end that a close-delimited body would take for complete.
    var abortClient = false
    /// The upstream connection is finished (not reusable).
    var closeUpstream = false
    /// HTTP/1 is over (101): relay raw bytes from now on; leftovers are already in toClient/toUpstream.
    var switchedToRaw = false
    /// What the session's extra upstream connections (lanes) are to do (H2ToH1Relay only).
    var lanes = LaneCommands()
    /// Reading to pause (true) or resume (false) because the other side's flow control is full or drained.
    var pauseReading: [ProxyPeer: Bool] = [:]
    /// The upstream sent bytes with no request outstanding (a response nobody asked for): its connection is closed
    /// (`closeUpstream`) rather than its bytes served as the answer to the client's next request. Names the upstream.
    var unsolicitedUpstream: UpstreamTarget?
    /// The relay cannot carry the request on this upstream connection: the session sends it again over a new one.
    var retry: RelayRetry?
    /// Responses a breakpoint holds whole: the session lists each as a hold and hands its release back with
    /// `ExchangeRelay.releaseResponse` (SessionContext+Breakpoints).
    var responseHolds: [ResponseToHold] = []
}

/// What a lane relay asks of the session's extra upstream connections in one step (H2ToH1Relay; its lane `.primary`
/// is the session's upstream and uses `toUpstream`/`closeUpstream` instead).
struct LaneCommands {
    /// Lanes to connect.
    var open: [UpstreamLane] = []
    /// Bytes for lanes, in order.
    var bytes: [(lane: UpstreamLane, bytes: [UInt8])] = []
    /// Lanes that are finished.
    var close: [UpstreamLane] = []
    /// Lanes that sent bytes with no request outstanding (an extra response): closed (`close`, or `closeUpstream`)
    /// rather than served as the next stream's answer; the session says so in a notice.
    var unsolicited: [UpstreamLane] = []

    var isEmpty: Bool { open.isEmpty && bytes.isEmpty && close.isEmpty && unsolicited.isEmpty }
}

/// A request that goes again over a new upstream connection, these bytes whole (the request, and anything after
/// it); the relay is done (H1ToH2Relay).
enum RelayRetry: Equatable {
    /// The client's first request asks to switch protocols (Upgrade), which HTTP/2 cannot carry: the new connection
    /// offers only http/1.1, as URLSession makes a WebSocket's connection (`--upstream-alpn ios`).
    case overHTTP1([UInt8])
    /// The upstream's GOAWAY refused the request in flight (its stream is above the GOAWAY's last stream id: never
    /// processed, RFC 9113 §6.8), and URLSession retries such a request.
    case onNewConnection([UInt8])
}

extension RelayOutput {
    /// Nothing to carry out but its decisions: a step that only read a request head. The owner answers the
    /// decisions and carries out the answers' steps without a pass over this one (the keep-alive path: one relay
    /// step's bookkeeping per request, as when the decision was made inside the relay).
    var onlyAsks: Bool {
        !toDecide.isEmpty && toClient.isEmpty && toUpstream.isEmpty && exchanges.isEmpty && connect == nil
            && !closeClient && !closeUpstream && !switchedToRaw && lanes.isEmpty && pauseReading.isEmpty
            && unsolicitedUpstream == nil && retry == nil && responseHolds.isEmpty
    }

    /// Hands over what a relay step collected and starts afresh.
    mutating func take() -> RelayOutput {
        let collected = self
        self = RelayOutput()
        return collected
    }

    /// Hands over the requests this step holds for a decision, leaving the rest of the output to apply.
    mutating func takeToDecide() -> DecisionRequests {
        var requests = DecisionRequests()
        swap(&requests, &toDecide)
        return requests
    }
}

/// What every relay records of one exchange, for its console line and trace.
protocol ExchangeRecording {
    var method: String { get }
    var url: String { get }
    var outcome: ExchangeSummary.ATSOutcome { get }
    var codes: [ExchangeError] { get }
    var started: Double { get }
    var status: Int? { get }
    var requestBytes: Int { get }
    var responseBytes: Int { get }
    /// Heads, timings and body bytes, when details are recorded (`ProxyEnvironment.recording`).
    var recorder: ExchangeRecorder? { get }
    /// What the rules stage did and still does to the exchange; nil when no rule touched it.
    var rules: ExchangeRules? { get }
}

extension ExchangeRecording {
    /// The finished exchange; `httpVersion` is the protocol the app would have spoken with the server.
    func summary(httpVersion: String, now: Double, interruption: String? = nil) -> ExchangeSummary {
        var summary = ExchangeSummary(
            method: method, url: url, status: status, httpVersion: httpVersion, outcome: outcome, errors: codes,
            requestBytes: requestBytes, responseBytes: responseBytes,
            durationMilliseconds: max(0, (now - started) * 1000), interruption: interruption)
        // Only when recording: setting even a nil detail would allocate the record's box on every exchange.
        if let recorder { summary.detail = recorder.detail(started: started, ended: now) }
        if let rules {
            if !rules.applied.isEmpty { summary.rules = rules.applied }
            summary.replayOf = rules.replayOf
        }
        return summary
    }
}

extension UpstreamLane {
    /// The session's own upstream connection, when a relay treats it as the first of its lanes.
    static let primary = UpstreamLane(0)
}

/// A relay of HTTP exchanges between a client's and an upstream's plaintext byte streams (HTTP/1.1 or HTTP/2).
protocol ExchangeRelay: AnyObject {
    /// The owner's answer to the request `id` a step held (`RelayOutput.toDecide`), in the same step or any later
    /// one: the relay carries the request out and resumes what it held behind it. An id the relay no longer holds
    /// (the client reset the stream, or went, meanwhile) is ignored.
    func resolve(_ id: Int, _ decision: RequestDecision) -> RelayOutput
    /// Whether the request `id` still waits for its answer: a request the client gave up meanwhile (an h2 stream it
    /// reset in the same read as its head) is not decided at all, so no rule, trace or notice acts on it.
    func isHolding(_ id: Int) -> Bool
    /// The release of a response a breakpoint holds (`RelayOutput.responseHolds`, `id` as given there): sent as held
    /// (`release` nil: the hold timed out), with a person's edits, or reset (abort). An id no longer held is ignored.
    func releaseResponse(_ id: Int, _ release: HoldRelease?) -> RelayOutput
    func clientBytes(_ bytes: [UInt8]) -> RelayOutput
    func clientEOF() -> RelayOutput
    /// The client connection is gone (reset, failed, or closed by the proxy's shutdown): nothing more can reach the
    /// client, so the exchanges in flight end here and are logged as cut off, with `reason`.
    func clientGone(_ reason: String) -> RelayOutput
    func upstreamBytes(_ bytes: [UInt8]) -> RelayOutput
    func upstreamEOF() -> RelayOutput
    /// The upstream connection failed (a TCP reset): unlike `upstreamEOF`, it ends no close-delimited body, so a
    /// response in flight is cut off (`abortClient`), not complete.
    func upstreamReset(_ reason: String) -> RelayOutput
    /// No exchange in flight: closing now loses nothing.
    var isIdle: Bool { get }
    /// The owner has written `output`'s bytes on (into TLS): the relay may keep their storage for its next steps.
    func recycle(_ output: inout RelayOutput)
    /// The connection went quiet: drop storage kept by `recycle`.
    func releaseBuffers()
    /// What the relay waits for now, for the session's deadlines (`.nothing` in relays that keep none).
    var wait: RelayWait { get }
    /// When the request body in flight last made progress (the session's clock).
    var lastRequestProgress: Double { get }
    /// The deadline of `wait` passed (`limit` after it began, or after the body's last byte): 408 to a client whose
    /// head or body stalled (a close once its response has started); for a silent upstream, a 504 carrying
    /// `timeoutAnswer`'s `X-ATS-*` fields and the app's -1001. Either way the connection ends.
    func deadlinePassed(_ wait: RelayWait, limit: Duration, timeoutAnswer: ATSAnswer) -> RelayOutput
    /// A relay of many requests at once (an h2 client): when the earliest of its streams' deadlines falls (the
    /// session's clock), nil when none runs (StreamDeadlines).
    var nextStreamDeadline: Double? { get }
    /// Ends the streams whose deadlines passed (a stalled header block ends the connection); `timeoutAnswer` gives
    /// a 504 its `X-ATS-*` fields. Streams not yet due are left for the next `nextStreamDeadline`.
    func streamDeadlinesPassed(timeoutAnswer: ATSAnswer) -> RelayOutput
    /// The adapter stopped (`held`) or resumed reading the client because an upstream's or a lane's write buffer
    /// filled or drained: the client's bytes wait in the socket for the proxy, so no request-body or header-block
    /// deadline runs meanwhile, and each restarts at `time` (the session's clock) on release.
    func clientReadingHeld(_ held: Bool, at time: Double)
}

extension ExchangeRelay {
    /// Relays whose upstream frames every response itself (HTTP/2) lose nothing more to a reset than to an EOF.
    func upstreamReset(_ reason: String) -> RelayOutput { upstreamEOF() }
    func recycle(_ output: inout RelayOutput) {}
    func releaseBuffers() {}
    var wait: RelayWait { .nothing }
    var lastRequestProgress: Double { 0 }
    func deadlinePassed(_ wait: RelayWait, limit: Duration, timeoutAnswer: ATSAnswer) -> RelayOutput { RelayOutput() }
    var nextStreamDeadline: Double? { nil }
    func streamDeadlinesPassed(timeoutAnswer: ATSAnswer) -> RelayOutput { RelayOutput() }
    func clientReadingHeld(_ held: Bool, at time: Double) {}
}

/// What an exchange relay waits for, so the session can keep a deadline on it (ProxySession+Deadlines). The number
/// is the exchange's (heads begun on the connection), so a wait for the next head or body is told from the last one.
enum RelayWait: Equatable {
    /// Nothing the proxy keeps a deadline on: an idle connection (the idle timeout applies), or a relay that is done.
    case nothing
    /// The client started a request head and has not finished it.
    case requestHead(Int)
    /// The client is sending a request body (`lastRequestProgress` says when its last byte came).
    case requestBody(Int)
    /// The request went upstream whole (or waits for `100 Continue`) and no response byte has come back.
    case response(Int)
}

/// A relay that spreads exchanges over several upstream connections (lanes) the session opens for it.
protocol LaneRelay: ExchangeRelay {
    func laneConnected(_ lane: UpstreamLane) -> RelayOutput
    func laneFailed(_ lane: UpstreamLane, error: String) -> RelayOutput
    func laneBytes(_ lane: UpstreamLane, _ bytes: [UInt8]) -> RelayOutput
    func laneEOF(_ lane: UpstreamLane) -> RelayOutput
    /// The lane's connection failed (a TCP reset): its response in flight is cut off, not ended.
    func laneReset(_ lane: UpstreamLane, reason: String) -> RelayOutput
}

extension HTTP1Relay: ExchangeRelay {}
