import ATSPolicy
import ProxyTrace

/// Observations folded by origin, server facts and carriage: a capture of a million exchanges becomes a handful
/// of observations per host. Feed it exchange records as they end (a live view) or read a capture file into it.
public struct ObservationLog: Sendable {
    /// In the order first seen.
    public private(set) var observations: [Observation] = []
    private var index: [Observation.FoldingKey: Int] = [:]

    public init() {}

    /// The log of these observations, folded.
    public init(_ observations: [Observation]) {
        for o in observations { add(o) }
    }

    /// Exchanges folded in so far.
    public var exchangeCount: Int { observations.reduce(0) { $0 + $1.exchanges } }

    /// Adds `observation`, folding it into an equal one (same origin, same server facts bar their time, same
    /// carriage): counts add up and the later facts' time is kept (certificate validity is judged at it).
    public mutating func add(_ observation: Observation) {
        let key = observation.foldingKey
        guard let i = index[key] else {
            index[key] = observations.count
            observations.append(observation)
            return
        }
        observations[i].exchanges += observation.exchanges
        if let later = observation.handshake, let current = observations[i].handshake,
            later.observedAt > current.observedAt
        {
            observations[i].handshake = later
        }
    }

    /// Adds one finished exchange as the proxy records it (with its connection: the sinks that keep traffic get it).
    /// The proxy's own set-up site (`ExchangeAction.proxySite`) is not the app's traffic and is not added; nor is a
    /// failure a rule injected (a fault or block rule acted, `ExchangeAction.injected`): the server never had a say.
    public mutating func add(_ exchange: ExchangeSummary) {
        guard exchange.action != .proxySite, !Self.isInjected(exchange) else { return }
        let carriage: Observation.Carriage =
            exchange.outcome == .failed
            ? .unreachable : exchange.action == .tunnelled || exchange.kind == .tunnel ? .tunnelled : .observed
        add(
            Observation(
                url: exchange.url, handshake: exchange.connection?.upstreamHandshake, exchanges: 1,
                carriage: carriage))
    }

    /// Whether a fault or block rule failed the exchange on purpose (whatever its action says: a record without
    /// the connection's facts has none).
    static func isInjected(_ exchange: ExchangeSummary) -> Bool {
        exchange.action == .injected || exchange.rules.contains { $0.action == "fault" || $0.action == "block" }
    }
}
