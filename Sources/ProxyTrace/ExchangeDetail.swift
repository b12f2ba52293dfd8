import ATSPolicy
import HTTP1Core

/// What an exchange record holds beyond its console line, for the sinks that keep or show traffic (a capture
/// store, a live view): the heads on each leg, the timings, the TLS of both legs, the ATS decision and what the
/// proxy did. Built only when a sink asks for it (`RecordingOptions` on the environment), so the relaying path
/// pays nothing for it otherwise.
///
/// The heads are the parsed values the relays already hold (their storage is shared, not copied); header values
/// are as received. `Proxy-Authorization` is removed from the client's request head before it is recorded.
public struct ExchangeDetail: Sendable {
    /// The request as the client sent it. For an HTTP/2 client, its pseudo-headers as a request line
    /// (`:method`, `:path`) and its other fields in order.
    public var request: HTTPRequestHead? {
        get { box.value.request }
        set { box.value.request = newValue }
    }
    /// The request as it went upstream, when it differs from `request` (absolute-form made origin-form, a
    /// translated h1↔h2 head, proxy fields removed); nil when the same bytes went up.
    public var forwardedRequest: HTTPRequestHead? {
        get { box.value.forwardedRequest }
        set { box.value.forwardedRequest = newValue }
    }
    /// The response as the upstream sent it (nil when there was none: a local answer, a block).
    public var response: HTTPResponseHead? {
        get { box.value.response }
        set { box.value.response = newValue }
    }
    /// The response as the client got it, when it differs from `response` (annotated with `X-ATS-*`, translated,
    /// or answered by the proxy itself).
    public var clientResponse: HTTPResponseHead? {
        get { box.value.clientResponse }
        set { box.value.clientResponse = newValue }
    }
    public var timings: ExchangeTimings {
        get { box.value.timings }
        set { box.value.timings = newValue }
    }
    /// Body bytes seen, up to the recording's limit; nil when bodies are not recorded.
    public var requestBody: CapturedBody? {
        get { box.value.requestBody }
        set { box.value.requestBody = newValue }
    }
    public var responseBody: CapturedBody? {
        get { box.value.responseBody }
        set { box.value.responseBody = newValue }
    }
    /// The exchange's own trace records the session did not make, for a reader to rebuild from this record
    /// (`RecordingOptions.rebuildsExchangeTraces`); empty when they were made as the console shows them.
    ///
    /// Kept beside the box, not in it: the session sets it on a record whose box the relay's copy still shares, and a
    /// write into the box copied every field of it (about 640 instructions per captured exchange).
    public var rebuiltTrace: RebuiltTrace = []

    private struct Fields {
        var request: HTTPRequestHead?
        var forwardedRequest: HTTPRequestHead?
        var response: HTTPResponseHead?
        var clientResponse: HTTPResponseHead?
        var timings: ExchangeTimings
        var requestBody: CapturedBody?
        var responseBody: CapturedBody?
    }

    // A record is copied through commands, sinks and the capture's encoder: with the fields inline, every copy
    // retained each head, body and string of them.
    private var box: CopyOnWrite<Fields>

    public init(
        request: HTTPRequestHead? = nil, forwardedRequest: HTTPRequestHead? = nil, response: HTTPResponseHead? = nil,
        clientResponse: HTTPResponseHead? = nil, timings: ExchangeTimings, requestBody: CapturedBody? = nil,
        responseBody: CapturedBody? = nil
    ) {
        box = CopyOnWrite(Fields(
            request: request, forwardedRequest: forwardedRequest, response: response, clientResponse: clientResponse,
            timings: timings, requestBody: requestBody, responseBody: responseBody))
    }
}

/// Which of an exchange's own CFNetwork-style records were left to a reader of the record to rebuild, with the same
/// `DiagnosticsRecord` constructors and the record's fields: a capture that is the only consumer of traces then pays
/// nothing for them on the relaying path. The connection's records (TCP, TLS, ATS Decision) are always made.
public struct RebuiltTrace: OptionSet, Sendable, Hashable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    /// `LoaderWhatToDo` and `Protocol Enqueue` (level 1, no headers), at the exchange's start: an intercepted
    /// request that went upstream. The enqueued version is the upstream's protocol (`HTTP/2.0` when its ALPN is h2).
    public static let requestStart = RebuiltTrace(rawValue: 1)
    /// `Protocol Received` (when there was a status) and `Did Finish`, at its end: an exchange the app's task
    /// completed (not one that failed with a violation).
    public static let finish = RebuiltTrace(rawValue: 2)
}

/// When an exchange's steps happened, in Unix seconds: enough for HAR's `timings` (send, wait, receive).
public struct ExchangeTimings: Sendable, Equatable, Codable {
    /// The request's first byte reached the proxy.
    public var started: Double
    /// The whole request had gone upstream (nil when it never went: blocked, answered locally, cut off).
    public var requestSent: Double?
    /// The first byte of the upstream's response arrived (nil when none did).
    public var firstResponseByte: Double?
    /// The exchange ended (its last byte went to the client, or it was cut off).
    public var ended: Double

    public init(started: Double, requestSent: Double? = nil, firstResponseByte: Double? = nil, ended: Double) {
        self.started = started
        self.requestSent = requestSent
        self.firstResponseByte = firstResponseByte
        self.ended = ended
    }
}

/// The first bytes of a body, as they streamed past (before any content decoding: gzip stays gzip), and how big
/// it really was.
public struct CapturedBody: Sendable, Equatable {
    public var bytes: [UInt8]
    /// Every body byte that passed, kept or not.
    public var totalBytes: Int
    /// True when the body was longer than what was kept.
    public var isTruncated: Bool { bytes.count < totalBytes }

    public init(bytes: [UInt8], totalBytes: Int) {
        self.bytes = bytes
        self.totalBytes = totalBytes
    }
}

/// The TLS of one leg of a connection, as negotiated.
public struct TLSLegFacts: Sendable, Equatable, Codable {
    public var version: String?
    public var cipherSuite: String?
    public var alpn: String?
    /// The SNI the client sent (client leg) or the proxy sent (upstream leg; nil for an IP address).
    public var serverName: String?
    public var resumed: Bool

    public init(version: String?, cipherSuite: String?, alpn: String?, serverName: String?, resumed: Bool) {
        self.version = version
        self.cipherSuite = cipherSuite
        self.alpn = alpn
        self.serverName = serverName
        self.resumed = resumed
    }
}

/// What the proxy did with an exchange.
public enum ExchangeAction: String, Sendable, Equatable, Codable {
    /// Sent upstream and answered by it.
    case relayed
    /// Relayed although the policy forbids it, with `X-ATS-*` headers (`--ats annotate`).
    case annotated
    /// The client's TLS handshake was failed the way the app's would be (`--block tls`).
    case blockedHandshake
    /// Answered by the proxy with the violation (`--block http`, a -1022 refusal of cleartext).
    case blockedAnswer
    /// Tunnelled without interception (`note` says why: --passthrough, a pinned host, not TLS).
    case tunnelled
    /// Refused by the proxy before any upstream was involved (malformed, credentials, deadline).
    case refused
    /// The upstream could not be reached or did not answer: a network failure, not an ATS verdict.
    case failed
    /// Answered by the proxy's own set-up site (`http://atsproxy.invalid/`, the proxy's own address, the trust
    /// check): the proxy's pages, not the app's traffic, so the report and the hosts summary leave it out.
    case proxySite
    /// Failed on purpose by a rule (issue 33's `--fault` and `--block-list`, a status fault or a blocked URL): the
    /// failure is the proxy's, not the server's, so the report leaves it out as it leaves out the set-up site.
    case injected
}

/// The connection an exchange belongs to, and the ATS verdict that applied to it.
public struct ConnectionRecord: Sendable {
    /// The client connection (the trace's Connection ID).
    public var connectionID: UInt64 {
        get { box.value.connectionID }
        set { box.value.connectionID = newValue }
    }
    /// `192.168.1.20:51234`, when known.
    public var clientAddress: String? {
        get { box.value.clientAddress }
        set { box.value.clientAddress = newValue }
    }
    /// The upstream's address as connected to (`93.184.216.34:443`, `[::1]:8443`): the name's resolved address,
    /// after `--map`; nil when no upstream connection was made (a refusal, a name that did not resolve).
    public var upstreamAddress: String? {
        get { box.value.upstreamAddress }
        set { box.value.upstreamAddress = newValue }
    }
    /// The TLS between the client and the proxy (nil for plain HTTP and tunnels).
    public var clientTLS: TLSLegFacts? {
        get { box.value.clientTLS }
        set { box.value.clientTLS = newValue }
    }
    /// The TLS between the proxy and the upstream, with the certificate facts it was judged on.
    public var upstreamTLS: TLSLegFacts? {
        get { box.value.upstreamTLS }
        set { box.value.upstreamTLS = newValue }
    }
    public var upstreamHandshake: HandshakeFacts? {
        get { box.value.upstreamHandshake }
        set { box.value.upstreamHandshake = newValue }
    }
    /// The plist entry (or the defaults) that decided, and why; nil when ATS was not evaluated.
    public var decision: PolicyDecision? {
        get { box.value.decision }
        set { box.value.decision = newValue }
    }
    /// The violations found, with their codes and fixes (empty when allowed).
    public var violations: [ATSViolation] {
        get { box.value.violations }
        set { box.value.violations = newValue }
    }

    private struct Fields {
        var connectionID: UInt64
        var clientAddress: String?
        var upstreamAddress: String?
        var clientTLS: TLSLegFacts?
        var upstreamTLS: TLSLegFacts?
        var upstreamHandshake: HandshakeFacts?
        var decision: PolicyDecision?
        var violations: [ATSViolation]
    }

    // A record is copied through commands, sinks and the capture's encoder: with the fields inline, every copy
    // retained each head, body and string of them.
    private var box: CopyOnWrite<Fields>

    /// True when `other` is this record or an unchanged copy of it (the same storage): then every field is equal,
    /// and a session that keeps its connection's record hands out such copies until something of it changes.
    public func isUnchangedCopy(of other: ConnectionRecord) -> Bool { box.sharesStorage(with: other.box) }

    public init(
        connectionID: UInt64, clientAddress: String? = nil, upstreamAddress: String? = nil,
        clientTLS: TLSLegFacts? = nil, upstreamTLS: TLSLegFacts? = nil, upstreamHandshake: HandshakeFacts? = nil,
        decision: PolicyDecision? = nil, violations: [ATSViolation] = []
    ) {
        box = CopyOnWrite(Fields(
            connectionID: connectionID, clientAddress: clientAddress, upstreamAddress: upstreamAddress,
            clientTLS: clientTLS, upstreamTLS: upstreamTLS, upstreamHandshake: upstreamHandshake, decision: decision,
            violations: violations))
    }
}

/// A value's fields behind one reference, copied when changed while shared (copy-on-write): copying the value is one
/// retain, however many strings, arrays and heads the fields hold.
struct CopyOnWrite<Value: Sendable>: Sendable {
    private final class Box: @unchecked Sendable {
        // @unchecked: changed only through `value`'s modify, when this box has one owner.
        var value: Value
        init(_ value: Value) { self.value = value }
    }

    private var box: Box

    init(_ value: Value) { box = Box(value) }

    var value: Value {
        get { box.value }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.value) }
            yield &box.value
        }
    }

    /// True when both hold the same storage: one is an unchanged copy of the other.
    func sharesStorage(with other: CopyOnWrite<Value>) -> Bool { box === other.box }
}
