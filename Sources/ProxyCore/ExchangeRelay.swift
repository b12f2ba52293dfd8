import HTTP1Core
import ProxyTrace

/// What the owner decides for one request.
enum RequestDecision {
    /// Send `head` upstream (to `upstream`, when it names another host than the connected one) and add
    /// `annotation` to the response.
    case forward(
        head: HTTPRequestHead, url: String, upstream: UpstreamTarget?, annotation: [(String, String)],
        outcome: ExchangeSummary.ATSOutcome, codes: [ExchangeError])
    /// Answer locally with this response; the request body is read and dropped.
    case answer(
        head: HTTPResponseHead, body: [UInt8], url: String, outcome: ExchangeSummary.ATSOutcome,
        codes: [ExchangeError])
}

/// A host and port to connect to for plain-HTTP forwarding.
struct UpstreamTarget: Equatable {
    var host: String
    var port: Int
}

/// Bytes and decisions produced by one relay step.
struct RelayOutput {
    var toClient: [UInt8] = []
    var toUpstream: [UInt8] = []
    var exchanges: [ExchangeSummary] = []
    /// Connect (or reconnect) the upstream before `toUpstream` can go out; set by plain-HTTP forwarding.
    var connect: UpstreamTarget?
    /// Close the client after `toClient` is flushed (and the upstream with it).
    var closeClient = false
    /// The upstream connection is finished (not reusable).
    var closeUpstream = false
    /// HTTP/1 is over (101): relay raw bytes from now on; leftovers are already in toClient/toUpstream.
    var switchedToRaw = false
    /// Extra upstream connections to open, bytes for them, and lanes that are finished (H2ToH1Relay only; its
    /// lane `.primary` is the session's upstream and uses `toUpstream`/`closeUpstream` instead).
    var openLanes: [UpstreamLane] = []
    var toLanes: [(lane: UpstreamLane, bytes: [UInt8])] = []
    var closeLanes: [UpstreamLane] = []
    /// Reading to pause (true) or resume (false) because the other side's flow control is full or drained.
    var pauseReading: [ProxyPeer: Bool] = [:]
}

extension RelayOutput {
    /// Hands over what a relay step collected and starts afresh.
    mutating func take() -> RelayOutput {
        let collected = self
        self = RelayOutput()
        return collected
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
}

extension ExchangeRecording {
    /// The finished exchange; `httpVersion` is the protocol the app would have spoken with the server.
    func summary(httpVersion: String, now: Double, interruption: String? = nil) -> ExchangeSummary {
        ExchangeSummary(
            method: method, url: url, status: status, httpVersion: httpVersion, outcome: outcome, errors: codes,
            requestBytes: requestBytes, responseBytes: responseBytes,
            durationMilliseconds: max(0, (now - started) * 1000), interruption: interruption)
    }
}

extension UpstreamLane {
    /// The session's own upstream connection, when a relay treats it as the first of its lanes.
    static let primary = UpstreamLane(0)
}

/// A relay of HTTP exchanges between a client's and an upstream's plaintext byte streams (HTTP/1.1 or HTTP/2).
protocol ExchangeRelay: AnyObject {
    func clientBytes(_ bytes: [UInt8]) -> RelayOutput
    func clientEOF() -> RelayOutput
    /// The client connection is gone (reset, failed, or closed by the proxy's shutdown): nothing more can reach the
    /// client, so the exchanges in flight end here and are logged as cut off, with `reason`.
    func clientGone(_ reason: String) -> RelayOutput
    func upstreamBytes(_ bytes: [UInt8]) -> RelayOutput
    func upstreamEOF() -> RelayOutput
    /// No exchange in flight: closing now loses nothing.
    var isIdle: Bool { get }
    /// The owner has written `output`'s bytes on (into TLS): the relay may keep their storage for its next steps.
    func recycle(_ output: inout RelayOutput)
    /// The connection went quiet: drop storage kept by `recycle`.
    func releaseBuffers()
}

extension ExchangeRelay {
    func recycle(_ output: inout RelayOutput) {}
    func releaseBuffers() {}
}

/// A relay that spreads exchanges over several upstream connections (lanes) the session opens for it.
protocol LaneRelay: ExchangeRelay {
    func laneConnected(_ lane: UpstreamLane) -> RelayOutput
    func laneFailed(_ lane: UpstreamLane, error: String) -> RelayOutput
    func laneBytes(_ lane: UpstreamLane, _ bytes: [UInt8]) -> RelayOutput
    func laneEOF(_ lane: UpstreamLane) -> RelayOutput
}

extension HTTP1Relay: ExchangeRelay {}
