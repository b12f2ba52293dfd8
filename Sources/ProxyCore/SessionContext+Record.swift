import ATSPolicy
import ProxyTrace
import TLSCore

// The exchange record's connection-level facts. Relays record what belongs to one exchange (heads, timings, body
// bytes); the session adds what belongs to its connection (who the client is, the TLS of both legs, the ATS
// decision and its violations) and what the proxy did, at the one place every exchange passes through
// (`recordExchange`). Only when a sink asked for details (`env.recording`): the console line needs none of it.

/// The TLS facts of an intercepted connection's two legs, kept once each handshake completes.
struct InterceptionLegs {
    var client: TLSLegFacts?
    var upstream: TLSLegFacts?
    /// The upstream handshake's facts, as the policy judged them (version, suite, chain, trust).
    var upstreamFacts: HandshakeFacts?
}

/// The decision of the plain-HTTP request being relayed: an HTTP/1.1 connection answers one request at a time, so
/// the last decision made is that of the exchange that completes next.
struct PlainDecisionRecord {
    var decision: PolicyDecision?
    var violations: [ATSViolation] = []
    /// The proxy's own set-up site answered it (`ExchangeAction.proxySite`).
    var proxySite = false
}

extension TLSLegFacts {
    /// The facts of `engine`'s completed handshake; `serverName` is the SNI sent on that leg.
    init?(_ engine: TLSEngine?, serverName: String?) {
        guard let engine, let negotiated = engine.negotiated else { return nil }
        self.init(
            version: negotiated.versionName, cipherSuite: negotiated.cipherSuiteName, alpn: negotiated.alpn,
            serverName: serverName, resumed: engine.sessionReused)
    }
}

extension SessionContext {
    /// The violation of the last cleartext request answered with a block (read by `logExchange`).
    var lastPlainBlock: ATSViolation? { plain?.lastBlock }

    /// The decision of the plain-HTTP exchange in flight (or upgraded), for its record (read by `recorded`).
    var plainDecision: PlainDecisionRecord {
        switch phase {
        case .plain(let p): p.decisionRecord
        case .upgraded(let u): u.plainDecision
        case .front, .sniffing, .tunnel, .intercepting, .done: PlainDecisionRecord()
        }
    }

    /// `exchange` with its connection, action and (for exchanges no relay recorded: blocked handshakes, tunnels,
    /// refused first requests) timings.
    /// `proxySite`: the set-up site answered it (the plain and intercepted layers know it themselves).
    func recorded(_ exchange: ExchangeSummary, finishTraced: Bool = true, proxySite: Bool = false) -> ExchangeSummary {
        var record = exchange
        let i = interception
        if let i {
            if i.legs.client == nil { i.legs.client = TLSLegFacts(i.client.engine, serverName: i.hello.serverName) }
            if i.legs.upstream == nil { i.legs.upstream = TLSLegFacts(i.upstream.engine, serverName: i.upstream.sni) }
        }
        let connection: ConnectionRecord
        if let kept = i?.connectionRecord, kept.clientAddress == clientAddress, kept.upstreamAddress == upstreamAddress {
            connection = kept
        } else {
            connection = ConnectionRecord(
                connectionID: id, clientAddress: clientAddress, upstreamAddress: upstreamAddress,
                clientTLS: i?.legs.client, upstreamTLS: i?.legs.upstream, upstreamHandshake: i?.legs.upstreamFacts,
                decision: i?.decision ?? plainDecision.decision,
                violations: i.map(\.violations) ?? plainDecision.violations)
            i?.connectionRecord = connection
        }
        var detail: ExchangeDetail
        if let recorded = exchange.detail {
            detail = recorded
        } else {
            let ended = now()
            detail = ExchangeDetail(
                timings: ExchangeTimings(started: ended - exchange.durationMilliseconds / 1000, ended: ended))
        }
        if !env.exchangeTraces {
            // The recorder marked what is usually left out; only an intercepted request that went upstream skipped
            // its start records (`traceRequestStart`), and only an exchange that did not fail its finish.
            var left: RebuiltTrace = finishTraced ? [] : .finish
            if i != nil, detail.rebuiltTrace.contains(.requestStart) { left.insert(.requestStart) }
            detail.rebuiltTrace = left
        }
        // One copy of the record's boxed extras for all three.
        let bySite = proxySite || i?.localSite != nil || plainDecision.proxySite
        let action = bySite ? .proxySite : Self.isInjected(exchange) ? .injected : action(of: exchange)
        record.setRecord(connection: connection, action: action, detail: detail)
        return record
    }

    /// A fault or block rule failed the exchange on purpose (at the connection or the request head).
    static func isInjected(_ exchange: ExchangeSummary) -> Bool {
        exchange.rules.contains { $0.action == "fault" || $0.action == "block" }
    }

    private func action(of exchange: ExchangeSummary) -> ExchangeAction {
        if exchange.kind == .tunnel {
            return exchange.outcome == .failed ? .failed : .tunnelled
        }
        switch exchange.outcome {
        case .failed: return .failed
        case .violation: return .annotated
        case .blocked:
            return exchange.kind == .refusedHandshake ? .blockedHandshake : .blockedAnswer
        case .allowed, .notEvaluated:
            // A status the proxy answered itself before anything went upstream (400, 407, 408…).
            // The status first: reading a head copies it out of the record, and most exchanges end below 400.
            if let status = exchange.status, status >= 400, exchange.detail?.response == nil,
                exchange.detail?.clientResponse != nil || exchange.detail == nil
            {
                return .refused
            }
            return .relayed
        }
    }
}
