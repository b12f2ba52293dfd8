import HTTP1Core
import ProxyTrace

/// The field by which a replay names the captured exchange it resends (issue 34). A replay is the proxy being its
/// own client: the web view and `atsproxy replay` send the request to the proxy's listener on loopback with this
/// field added, so it passes the same layers (rules, the ATS verdict, the capture) as the app's traffic. The session
/// takes the field off before anything else sees the request (SessionContext+Rules) and records its value as the
/// exchange's `replayOf`. Read only on a loopback client's connections, so the check costs the app's traffic
/// nothing and a device on the LAN cannot label its requests as replays.
enum ReplayMarker {
    /// `X-ATSProxy-Replay-Of: 12`.
    static let field = ExchangeSummary.replayMarkerField
    /// Prepared once: a loopback client's requests are looked at for it (its name filter rules most out at once).
    static let name = HTTPFieldName(field)

    /// The id the marker names; nil without one (or with a value that is not a positive id).
    static func value(in headers: HTTPHeaders) -> Int64? {
        guard let text = headers.first(name), let id = Int64(text), id > 0 else { return nil }
        return id
    }
}
