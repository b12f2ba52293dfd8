/// Both directions of one throttled connection, and the wait before its upstream is contacted: what the session
/// keeps per connection when a throttle rule matches it.
public struct ConnectionThrottle: Sendable {
    public let profile: LinkProfile
    /// Shapes what the proxy writes to the client leg (server → device).
    public var downlink: LinkShaper
    /// Shapes what the proxy writes to the upstream leg (device → server).
    public var uplink: LinkShaper

    /// - Parameters:
    ///   - seed: seeds both directions' loss draws (the uplink's from a derived seed).
    ///   - shared: the proxy-wide buckets, when one throttle covers every connection; nil for this connection alone.
    public init(profile: LinkProfile, seed: UInt64, shared: SharedLink? = nil) {
        self.profile = profile
        downlink = LinkShaper(
            direction: profile.downlink, roundTrip: profile.roundTrip, seed: seed, shared: shared?.downlink)
        uplink = LinkShaper(
            direction: profile.uplink, roundTrip: profile.roundTrip, seed: seed ^ 0x5DEE_CE66_D1CE_4E5B,
            shared: shared?.uplink)
    }

    /// How long to wait before contacting the upstream (DNS delay): the session arms a timer for it, then connects.
    /// With 100% loss the connection never gets through: the session should not connect at all.
    public var connectDelay: Duration { profile.dnsDelay }

    /// True when nothing will ever pass: the session holds the connection open and lets the app time out.
    public var stalls: Bool { profile.dropsEverything }
}
