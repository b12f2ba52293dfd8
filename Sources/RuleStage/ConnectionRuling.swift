import FilterCore
import ProxyTrace
import Throttle
import TrafficRules

/// What the rules decided before the upstream is contacted: at most one fault or block (the first that holds) and
/// at most one throttle (the first that holds).
public struct ConnectionRuling: Sendable {
    /// Fail the client leg this way instead of relaying (the first fault or block rule for the host).
    public var fault: FaultKind?
    /// Refuse the connection this way.
    public var block: BlockKind?
    /// Shape the connection's traffic with this profile.
    public var throttle: LinkProfile?
    /// The link the throttle's connections share when it covers the whole proxy; nil: this connection's own link.
    public var sharedLink: SharedLink? = nil
    /// The rules that acted, in order.
    public var applied: [AppliedRule]
}

extension RuleSnapshot {
    /// The rules for a connection to `host:port` (a CONNECT's target, a TLS name, a plain request's host): nil
    /// when none applies.
    public func atConnection(host: String, port: Int) -> ConnectionRuling? {
        guard !atConnection.isEmpty else { return nil }
        let facts = ExchangeFacts(point: .connection, host: host, port: port)
        var ruling = ConnectionRuling(fault: nil, block: nil, throttle: nil, applied: [])
        for loaded in atConnection where loaded.rule.applies(to: facts) {
            switch loaded.action {
            case .fault(let kind) where ruling.fault == nil && ruling.block == nil:
                ruling.fault = kind
                ruling.applied.append(
                    AppliedRule(id: loaded.id, action: "fault", point: "connection", note: "\(kind) (injected)"))
            case .block(let kind) where ruling.fault == nil && ruling.block == nil:
                ruling.block = kind
                ruling.applied.append(
                    AppliedRule(id: loaded.id, action: "block", point: "connection", note: "\(kind.rawValue) (injected)"))
            case .throttle(let profile, let shared) where ruling.throttle == nil:
                ruling.throttle = profile
                ruling.sharedLink = shared
                // A preset by its name ("3G"); a custom profile by its figures.
                let note = profile.name == "custom" ? profile.description : profile.name
                ruling.applied.append(
                    AppliedRule(
                        id: loaded.id, action: "throttle", point: "connection",
                        note: shared == nil ? note : note + " (whole proxy)"))
            default:
                continue
            }
        }
        return ruling.applied.isEmpty ? nil : ruling
    }
}
