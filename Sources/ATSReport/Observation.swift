import ATSPolicy

/// What the app was seen loading from one origin: a URL, the upstream TLS handshake's facts (for `https`/`wss`),
/// and how many exchanges went that way. The input of `PolicyReport`: a capture file (`ObservationLog(reading:)`), a
/// live session (`ObservationLog.add(_:)` per exchange record) or a test's hand-made values.
///
/// The facts are the server's, not a verdict: the report judges them again with whatever policy it is given. A
/// failed handshake is read as the proxy records one: the app-like attempt failed, then a permissive probe (every
/// version and suite) ran; `version` set means the probe completed and says what the server can do; `version` and
/// `serverCapabilities` both nil mean the server refused even the probe. (Facts shaped as `diagnose` keeps them, a
/// failure explained by capabilities alone, are judged as ATSPolicy judges a failed handshake: never allowed.)
public struct Observation: Sendable, Hashable, Codable {
    /// How the proxy carried the exchanges, when it did not see or reach the server's TLS.
    public enum Carriage: String, Sendable, Hashable, Codable {
        /// Intercepted (TLS facts recorded) or plain HTTP: everything needed to judge the load.
        case observed
        /// Tunnelled without interception: the server's TLS was not seen, so only the pre-connect rules are judged.
        case tunnelled
        /// The server could not be reached (a network failure the app gets whatever its policy).
        case unreachable
    }

    /// A URL the app loaded from this origin (the first seen): what `atsproxy explain` is asked about.
    public var url: String
    /// The host as the exchange records name it.
    public var host: String
    /// The upstream handshake, for secure loads the proxy intercepted.
    public var handshake: HandshakeFacts?
    /// Exchanges folded into this observation.
    public var exchanges: Int
    public var carriage: Carriage

    public init(
        url: String, host: String? = nil, handshake: HandshakeFacts? = nil, exchanges: Int = 1,
        carriage: Carriage = .observed
    ) {
        self.url = url
        self.host = Self.parsedHost(url) ?? host ?? url
        self.handshake = handshake
        self.exchanges = exchanges
        self.carriage = carriage
    }

    private static func parsedHost(_ url: String) -> String? {
        do throws(URLTargetError) { return try ConnectionTarget(parsing: url).host } catch { return nil }
    }

    /// The scheme, host and port the policy is asked about; nil when the URL cannot be read (a tunnel to a
    /// client that spoke no TLS is recorded as a bare `host:port`).
    public var target: ConnectionTarget? {
        do throws(URLTargetError) { return try ConnectionTarget(parsing: url) } catch { return nil }
    }

    /// The facts without the time they were taken, so that connections to the same server fold together.
    var foldingKey: FoldingKey {
        var facts = handshake
        facts?.observedAt = .init(timeIntervalSince1970: 0)
        return FoldingKey(origin: target?.description ?? url, facts: facts, carriage: carriage)
    }

    struct FoldingKey: Hashable {
        var origin: String
        var facts: HandshakeFacts?
        var carriage: Carriage
    }
}
