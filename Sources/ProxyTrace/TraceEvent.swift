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
        /// A request answered 407 because `--auth` credentials were missing or wrong: `proxyAuth`, and `message`
        /// as the console says it.
        case proxyAuthFailed
        /// A client's refusals of the proxy's certificate decided something (auto-passthrough): `url` names the host
        /// tunnelled from now on (it likely pins it in code), or is absent when the client trusts no host (the CA is
        /// not trusted); `message` as the console says it.
        case autoPassthrough
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
    public var proxyAuth: ProxyAuthFailure?
    public var message: String?

    public init(
        kind: Kind, time: Double, connectionID: UInt64, url: String? = nil, exchange: ExchangeSummary? = nil,
        handshake: HandshakeFacts? = nil, sessionResumed: Bool? = nil, decision: PolicyDecision? = nil,
        violations: [ATSViolation]? = nil, proxyAuth: ProxyAuthFailure? = nil, message: String? = nil
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
        self.proxyAuth = proxyAuth
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

/// A request the proxy refused with 407 (`--auth`): who asked, for what, and why. Never the credentials, not even
/// the user name.
public struct ProxyAuthFailure: Sendable, Equatable, Codable {
    public enum Reason: String, Sendable, Codable {
        /// No `Proxy-Authorization` field. Many clients ask without credentials first and send them after the
        /// 407's challenge; a client with no proxy password set stops here.
        case missing
        /// Credentials that are not the `--auth` ones (or not Basic credentials at all).
        case wrong
    }

    public var reason: Reason
    public var method: String
    /// The request target as sent: `host:443` for CONNECT, the URL for plain HTTP.
    public var target: String
    /// The client's address (`192.168.1.20:51234`), when the adapter gave it.
    public var client: String?

    public init(reason: Reason, method: String, target: String, client: String?) {
        self.reason = reason
        self.method = method
        self.target = target
        self.client = client
    }

    /// The console line: `proxy authentication failed: 192.168.1.20:51234 sent wrong credentials (CONNECT
    /// api.example.com:443); answered 407`.
    public var consoleText: String {
        let who = client ?? "a client"
        let what = switch reason {
        case .missing: "sent no credentials"
        case .wrong: "sent wrong credentials"
        }
        let hint = reason == .missing ? " (a client that has them sends them after this challenge)" : ""
        return "proxy authentication failed: \(who) \(what) (\(method) \(target)); answered 407\(hint)"
    }
}
