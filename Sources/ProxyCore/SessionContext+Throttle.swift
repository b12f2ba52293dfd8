import ProxyTrace
import RuleStage

// The connection point's throttle (issue 33, `--throttle PROFILE[@HOST-PATTERN]`). The session decides THAT a
// connection is shaped, once, when its target host is first known and before its upstream is contacted: the SNI of
// an interception (the CONNECT's host without one), the host of a plain connection's first forwarded request. It
// says so with one `ProxyCommand.throttle` ahead of the connect; the adapter applies it with its timers (ProxyServer:
// ShapedLeg), since pacing bytes is about the wire, not the protocol. Raw tunnels (passthrough, Apple's hosts) are
// not shaped: the adapter's byte relay carries them. Every exchange record of a shaped connection carries the rule.

extension SessionContext {
    /// Looks for a throttle rule for `host:port` the first time a target is known; nothing at all without rules.
    @inline(__always)
    func decideThrottle(host: String, port: Int) {
        guard env.rules != nil, !throttleDecided else { return }
        throttleDecided = true
        guard let ruling = currentRules()?.atConnection(host: host, port: port), let profile = ruling.throttle else {
            return
        }
        commands.append(.throttle(ThrottleOrder(profile: profile, sharedLink: ruling.sharedLink)))
        throttleRules = ruling.applied.filter { $0.action == "throttle" }
        if profile.dropsEverything {
            notice("\(host):\(port): throttled to \(profile.name): nothing passes, the app will time out")
        }
    }

    /// The record with the connection's throttle rule ahead of the exchange's own rules.
    func withThrottleRules(_ exchange: ExchangeSummary, _ rules: [AppliedRule]) -> ExchangeSummary {
        var noted = exchange
        noted.rules = rules + exchange.rules
        return noted
    }
}
