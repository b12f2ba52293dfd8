/// What an intercepted connection's upstream is offered by ALPN. The client is answered with the upstream's choice
/// when it offered it; otherwise the proxy translates between HTTP/1.1 and HTTP/2.
public enum UpstreamALPN: String, Sendable, CaseIterable {
    /// The client's own offer (h2, http/1.1), so the upstream sees the protocol the client asked for. A client
    /// offering h2 alone also offers http/1.1 upstream, since the proxy can translate and an origin without h2 would
    /// otherwise refuse the handshake (nginx sends no_application_protocol). An origin that refuses an offer without
    /// h2 (that alert, or a close before any request) is retried with both and remembered, so an HTTP/1.1 client
    /// still reaches an h2-only origin.
    case mirror
    /// What URLSession offers whatever the client did (h2, then http/1.1): the upstream negotiates exactly what
    /// the app's connection would, and an HTTP/1.1-only client is translated to h2 when the origin chooses it.
    case ios

    /// The protocols the proxy can relay, in the order a client offered them.
    static func relayable(_ offered: [String]) -> [String] {
        offered.filter { $0 == "h2" || $0 == "http/1.1" }
    }

    /// The upstream's ALPN offer for a client that offered `clientOffer`. `widened` adds the protocol the client did
    /// not offer (after a no_application_protocol refusal).
    func upstreamOffer(clientOffer: [String], widened: Bool = false) -> [String] {
        switch self {
        case .ios:
            return ["h2", "http/1.1"]
        case .mirror:
            var offer = Self.relayable(clientOffer)
            if offer == ["h2"] || widened && !offer.isEmpty {
                for p in ["h2", "http/1.1"] where !offer.contains(p) { offer.append(p) }
            }
            if widened && offer.isEmpty { offer = ["h2", "http/1.1"] }
            return offer
        }
    }

    /// What the client is answered with: the upstream's choice if the client offered it, else the client's first
    /// relayable protocol (translated), else nothing (a client without ALPN speaks HTTP/1.1).
    static func clientAnswer(clientOffer: [String], upstreamChoice: String?) -> [String] {
        let relayable = relayable(clientOffer)
        if let upstreamChoice, relayable.contains(upstreamChoice) { return [upstreamChoice] }
        if upstreamChoice == nil, relayable.contains("http/1.1") { return ["http/1.1"] }
        return relayable.first.map { [$0] } ?? []
    }
}
