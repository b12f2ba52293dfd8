import ProxyTrace

/// An exchange that switched protocols (a 101, e.g. a WebSocket): after it the proxy relays bytes it does not parse.
/// The 101 is logged when it happens; this keeps what the line at the upgraded connection's end needs. A plain-HTTP
/// one is the session's phase (the adapter relays it raw); an intercepted one belongs to its InterceptLayer (the
/// session still carries its bytes through TLS).
struct UpgradedConnection {
    let method: String
    let url: String
    let outcome: ExchangeSummary.ATSOutcome
    let errors: [ExchangeError]
    let started: Double
    var fromClient = 0
    var toClient = 0
    /// Which side ended it, when one closed before the connection was torn down.
    var endedBy: String?
    /// A plain-HTTP one's decision, for its end's record (SessionContext+Record).
    var plainDecision = PlainDecisionRecord()

    /// Raw relaying starts now (`started`), after `exchange` switched protocols.
    init(after exchange: ExchangeSummary, at started: Double) {
        method = exchange.method
        url = exchange.url
        outcome = exchange.outcome
        errors = exchange.errors
        self.started = started
    }
}

extension UpgradedConnection {
    /// Logs the end of an upgraded connection: the bytes each way since the 101, how long it lasted and why it
    /// ended. Without it a WebSocket would show only its 101, with no sign of what crossed it or when it closed.
    func logEnd(_ ctx: SessionContext, fallbackReason: String) {
        ctx.recordExchange(ExchangeSummary(
            method: method, url: url, status: 101, httpVersion: "UPGRADED", outcome: outcome, errors: errors,
            requestBytes: fromClient, responseBytes: toClient, durationMilliseconds: (ctx.now() - started) * 1000,
            note: "upgraded connection ended: \(endedBy ?? fallbackReason)"))
    }
}
