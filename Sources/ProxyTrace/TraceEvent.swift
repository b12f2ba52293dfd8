import ATSPolicy
import FoundationEssentials

/// One line of `--log-json FILE`: a self-contained JSON object per event, for machines. The schema is documented in
/// README.md ("JSON events"): fields that do not apply to a kind are left out, times are Unix seconds, and error
/// codes are numbers with their names next to them.
public struct TraceEvent: Sendable, Codable, Equatable {
    public enum Kind: String, Sendable, Codable {
        /// The upstream TLS handshake of an intercepted connection ended: `handshake`, `sessionResumed`.
        case tlsHandshake
        /// The policy's verdict on a connection or a cleartext request: `decision`, `violations`, and what the
        /// proxy did in `message`.
        case atsDecision
        /// One finished exchange, as its console line: `exchange`.
        case exchange
    }

    public var kind: Kind
    /// Unix time in seconds.
    public var time: Double
    /// The client connection (session) the event belongs to, as the diagnostics trace numbers it.
    public var connectionID: UInt64
    public var url: String?
    public var exchange: ExchangeSummary?
    public var handshake: HandshakeFacts?
    /// `tlsHandshake` events: whether the upstream handshake resumed an earlier session (whose certificate facts
    /// `handshake` then carries).
    public var sessionResumed: Bool?
    public var decision: PolicyDecision?
    public var violations: [ATSViolation]?
    public var message: String?

    public init(
        kind: Kind, time: Double, connectionID: UInt64, url: String? = nil, exchange: ExchangeSummary? = nil,
        handshake: HandshakeFacts? = nil, sessionResumed: Bool? = nil, decision: PolicyDecision? = nil,
        violations: [ATSViolation]? = nil, message: String? = nil
    ) {
        self.kind = kind
        self.time = time
        self.connectionID = connectionID
        self.url = url
        self.exchange = exchange
        self.handshake = handshake
        self.sessionResumed = sessionResumed
        self.decision = decision
        self.violations = violations
        self.message = message
    }

    /// The event as one line of JSON (sorted keys, no trailing newline).
    public func jsonLine() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .secondsSince1970
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }
}
