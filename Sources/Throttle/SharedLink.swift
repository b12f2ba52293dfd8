/// The two shared buckets of a proxy-wide throttle: every connection's downlink shapers draw from `downlink`, every
/// uplink shaper from `uplink`. A direction without a bandwidth limit has no bucket.
public struct SharedLink: Sendable {
    public let profile: LinkProfile
    public let downlink: SharedTokenBucket?
    public let uplink: SharedTokenBucket?

    public init(profile: LinkProfile) {
        self.profile = profile
        downlink = profile.downlink.bitsPerSecond.map { SharedTokenBucket(bitsPerSecond: $0) }
        uplink = profile.uplink.bitsPerSecond.map { SharedTokenBucket(bitsPerSecond: $0) }
    }
}
