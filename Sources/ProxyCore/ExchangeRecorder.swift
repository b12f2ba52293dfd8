import HTTP1Core
import ProxyTrace

/// What the sinks want recorded beyond the console line (`ProxyEnvironment.recording`): nil records nothing more,
/// and the relays then make no recorder and copy no body byte.
public struct RecordingOptions: Sendable, Equatable {
    /// Bytes kept of each request and response body (0: heads and timings only, no body bytes).
    public var bodyLimit: Int
    /// The sessions do not make an exchange's own trace records (`RebuiltTrace`) and mark the record instead: set when
    /// a capture is the only consumer of traces (no `--diagnostics` on the console). Those records were about 5 µs of
    /// a keep-alive request's loop-thread CPU, and their rows a part of the capture writer's.
    public var rebuildsExchangeTraces: Bool

    public init(bodyLimit: Int, rebuildsExchangeTraces: Bool = false) {
        self.bodyLimit = max(0, bodyLimit)
        self.rebuildsExchangeTraces = rebuildsExchangeTraces
    }
}

/// Collects one exchange's `ExchangeDetail` as it streams through a relay: the heads as they pass, the timings, and
/// the first `bodyLimit` bytes of each body (a body tap: bytes are copied only up to the limit, and not at all with
/// a limit of 0). Owned by the relay's exchange, on its loop thread.
final class ExchangeRecorder {
    private let bodyLimit: Int
    private let rebuildsTraces: Bool
    /// The request went upstream as decided (not answered by the proxy).
    private var forwarded = false
    var request: HTTPRequestHead?
    var forwardedRequest: HTTPRequestHead?
    var response: HTTPResponseHead?
    var clientResponse: HTTPResponseHead?
    var requestSent: Double?
    var firstResponseByte: Double?
    private var requestBody = BodyTap()
    private var responseBody = BodyTap()

    /// Prepared once: removing it by string prepared the name again on every exchange (about 1,000 instructions).
    private static let proxyAuthorization = HTTPFieldName("Proxy-Authorization")

    init(options: RecordingOptions) {
        bodyLimit = options.bodyLimit
        rebuildsTraces = options.rebuildsExchangeTraces
    }

    /// A recorder when details are recorded, else nil (the relays then skip every call).
    static func make(_ options: RecordingOptions?) -> ExchangeRecorder? {
        options.map(ExchangeRecorder.init)
    }

    /// The request as received and as forwarded; `forwarded` is kept only when it differs.
    func recordRequest(_ head: HTTPRequestHead, forwarded: HTTPRequestHead?) {
        var received = head
        // The proxy's own credentials are not the app's traffic, and are never kept.
        received.headers.remove(Self.proxyAuthorization)
        request = received
        if let forwarded {
            self.forwarded = true
            if forwarded != head { forwardedRequest = forwarded }
        }
    }

    /// The upstream's response head and, when the client got something else, what it got.
    func recordResponse(_ head: HTTPResponseHead, toClient: HTTPResponseHead? = nil, at time: Double) {
        response = head
        if let toClient, toClient != head { clientResponse = toClient }
        if firstResponseByte == nil { firstResponseByte = time }
    }

    /// The request head sent upstream, known only after the body ended (a body rule changed it).
    func recordForwardedRequest(_ head: HTTPRequestHead) {
        forwardedRequest = head == request ? nil : head
    }

    /// The head the client got, known only after the response's head arrived (a body rule changed it at the end).
    func recordClientResponse(_ head: HTTPResponseHead) {
        clientResponse = head == response ? nil : head
    }

    /// A response the proxy gave itself (a block, a refusal): there was no upstream response.
    func recordLocalResponse(_ head: HTTPResponseHead) {
        clientResponse = head
    }

    func requestBody(_ piece: some Collection<UInt8>) {
        requestBody.take(piece, limit: bodyLimit)
    }

    func responseBody(_ piece: some Collection<UInt8>) {
        responseBody.take(piece, limit: bodyLimit)
    }

    func detail(started: Double, ended: Double) -> ExchangeDetail {
        var detail = ExchangeDetail(
            request: request, forwardedRequest: forwardedRequest, response: response, clientResponse: clientResponse,
            timings: ExchangeTimings(
                started: started, requestSent: requestSent, firstResponseByte: firstResponseByte, ended: ended),
            requestBody: bodyLimit > 0 ? requestBody.captured : nil,
            responseBody: bodyLimit > 0 ? responseBody.captured : nil)
        // That the request went upstream, for the session, which left out its start records if it was intercepted
        // (`ProxySession.recorded` sets the final value).
        if rebuildsTraces, forwarded { detail.rebuiltTrace = .requestStart }
        return detail
    }
}

/// The first bytes of a body up to a limit, and the count of all of them.
struct BodyTap {
    private(set) var bytes: [UInt8] = []
    private(set) var total = 0

    mutating func take(_ piece: some Collection<UInt8>, limit: Int) {
        total += piece.count
        let room = limit - bytes.count
        guard room > 0 else { return }
        bytes.append(contentsOf: piece.prefix(room))
    }

    var captured: CapturedBody { CapturedBody(bytes: bytes, totalBytes: total) }
}
