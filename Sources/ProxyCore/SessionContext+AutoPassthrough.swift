import ProxyTrace
import TLSCore

// Theory of operation: the session's side of auto-passthrough (AutoPassthrough.swift holds the decision logic).
//
// - An intercepted connection whose client sends a request (plaintext after its handshake) is an acceptance of the
//   minted leaf for its host.
// - A refusal is one of: a certificate alert from the client in its handshake, a close during the handshake, or a
//   close within `refusalWindow` of its end with no request sent (a pin checked by the app once the handshake is
//   done). A leaf or protocol weak on purpose (`--block tls`'s flawed leaf, `--ats mirror` copying the upstream's
//   weaknesses) is refused on purpose: it never counts.
// - A CONNECT to a host the client has made tunnelled becomes a raw tunnel (FrontLayer asks `autoPassthroughNote`),
//   whose hellos are still judged.
// The client's address is asked of the adapter once, when interception starts: the client is then waiting for
// the proxy's answer to its ClientHello, so its connection is surely open (a refusing client closes at once).

extension SessionContext {
    /// A close this soon after the client's handshake, with no request, is taken for a pin check that failed.
    static let refusalWindow = 3.0

    /// The client's address without its port, fetched once (nil when the adapter cannot tell).
    func clientHost() -> String? {
        if let cached = clientHostCache { return cached }
        let host = clientHostProvider?()
        clientHostCache = host
        return host
    }

    /// Why `host` is tunnelled for this client, if it made the proxy tunnel it.
    func autoPassthroughNote(host: String) -> String? {
        guard let store = env.autoPassthrough, store.hasTunnelledHosts, let client = clientHost(),
            store.isTunnelled(client: client, host: host)
        else { return nil }
        return "the client at \(client) refused the proxy's certificate for it repeatedly (it likely pins it in code; "
            + "--no-auto-passthrough)"
    }

    /// The client sent its first request over the intercepted connection.
    func noteClientAccepted(_ i: InterceptLayer) {
        guard let store = env.autoPassthrough, !i.servesWeaknessOnPurpose, !i.client.trustJudged else { return }
        i.client.trustJudged = true
        guard let client = clientHost() else { return }
        store.accepted(client: client, host: i.host)
    }

    /// The client refused the leaf. The set-up site's own name is never tunnelled (it has no upstream): its
    /// refusals are not counted, its acceptances are (the device trusts the CA).
    func noteClientRefused(_ i: InterceptLayer) {
        guard let store = env.autoPassthrough, !i.servesWeaknessOnPurpose, i.localSite == nil, !i.client.trustJudged else { return }
        i.client.trustJudged = true
        guard let client = clientHost() else { return }
        switch store.refused(client: client, host: i.host) {
        case .nothing:
            break
        case .tunnel(let host, let refusals, let trusted):
            autoPassthroughDecided(url: InterceptLayer.httpsURL(host: host, port: i.port), "the app at \(client) "
                + "refused the proxy's certificate for \(host) \(refusals) times while trusting it for \(trusted) other "
                + "host\(trusted == 1 ? "" : "s"): it likely pins this host in code; tunnelling it from now on "
                + "(--no-auto-passthrough turns this off)")
        case .caNotTrusted(let refusals, let hosts):
            autoPassthroughDecided(url: nil, "the client at \(client) refused the proxy's certificate \(refusals) "
                + "times for \(hosts) host\(hosts == 1 ? "" : "s") and trusted it for none: it does not trust "
                + "ATSProxy's CA (install it and, on iOS, enable full trust in Settings › General › About › "
                + "Certificate Trust Settings); this is not pinning, and nothing is tunnelled for it")
        }
    }

    /// The notice, and with `--log-json` an `autoPassthrough` event, of a decision.
    private func autoPassthroughDecided(url: String?, _ text: String) {
        notice(text)
        if env.jsonEvents {
            commands.append(.log(.event(TraceEvent(
                kind: .autoPassthrough, time: now(), connectionID: id, url: url, message: text))))
        }
    }

    /// The client closed its side (close_notify, FIN or the whole connection; not a close the proxy decided): one
    /// that completed its handshake with the standard leaf and closed soon after with no request refused it.
    func noteClientClosedWithoutRequest() {
        guard env.autoPassthrough != nil, let i = interception, !i.client.trustJudged, !i.client.spoke,
            let done = i.client.handshakeDone, now() - done <= Self.refusalWindow
        else { return }
        noteClientRefused(i)
    }

    /// A failed client handshake that says the client refused the leaf: a certificate alert, or a close.
    static func isCertificateRefusal(_ error: TLSError) -> Bool {
        switch error {
        case .peerAlert(.unknownCA), .peerAlert(.badCertificate), .peerAlert(.certificateUnknown), .closedByPeer:
            true
        default:
            false
        }
    }
}
