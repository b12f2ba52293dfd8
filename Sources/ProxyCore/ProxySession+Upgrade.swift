import ProxyTrace

/// An exchange that switched protocols (a 101, e.g. a WebSocket): after it the proxy relays bytes it does not parse.
/// The 101 is logged when it happens; this keeps what the line at the upgraded connection's end needs.
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
}

extension ProxySession {
    /// The relay switched protocols after `exchange`: raw relaying starts now.
    func beginUpgrade(after exchange: ExchangeSummary) {
        upgraded = UpgradedConnection(
            method: exchange.method, url: exchange.url, outcome: exchange.outcome, errors: exchange.errors,
            started: now())
    }

    /// Notes which side closed the upgraded connection first (the later teardown says less).
    func upgradeEnded(by side: String) {
        if upgraded != nil, upgraded?.endedBy == nil { upgraded?.endedBy = side }
    }

    /// Logs the end of the upgraded connection, once: the bytes each way since the 101, how long it lasted and why
    /// it ended. Without it a WebSocket would show only its 101, with no sign of what crossed it or when it closed.
    func logUpgradeEnd(fallbackReason: String) {
        guard let u = upgraded else { return }
        upgraded = nil
        recordExchange(ExchangeSummary(
            method: u.method, url: u.url, status: 101, httpVersion: "UPGRADED", outcome: u.outcome, errors: u.errors,
            requestBytes: u.fromClient, responseBytes: u.toClient, durationMilliseconds: (now() - u.started) * 1000,
            note: "upgraded connection ended: \(u.endedBy ?? fallbackReason)"))
    }
}
