/// A token bucket for the peer's RST_STREAM frames that cancel work in progress (the "rapid reset" attack,
/// CVE-2023-44487): a server session ends the connection once the bucket is empty.
///
/// Why not nghttp2's own limiter (1.52.0-1+deb12u1 and later): it counts every RST_STREAM received, including
/// those on streams that already completed. Clients send such resets in normal use (Go's HTTP/2 client cancels a
/// stream whose response body it closes just as the END_STREAM arrives, about 2 % of streams under load), so a
/// long-lived busy connection drained nghttp2's bucket and was torn down with GOAWAY INTERNAL_ERROR every
/// 20,000–40,000 streams. A reset of a closed stream costs nothing; only resets of open streams are counted here,
/// with nghttp2's defaults (a burst of 1000, 33 a second).
public struct H2ResetRateLimit: Sendable, Equatable {
    /// Resets allowed at once; the bucket never holds more.
    public var burst: Double
    /// Resets regained per second.
    public var ratePerSecond: Double
    private var tokens: Double
    private var lastRefill: Double?

    /// nghttp2's defaults for its own limiter.
    public init(burst: Double = 1000, ratePerSecond: Double = 33) {
        self.burst = burst
        self.ratePerSecond = ratePerSecond
        tokens = burst
    }

    /// Takes one token at `now` (seconds on a monotonic clock); false when none is left, that is, the peer
    /// exceeded the limit.
    public mutating func allowReset(at now: Double) -> Bool {
        if let lastRefill, now > lastRefill {
            tokens = min(burst, tokens + (now - lastRefill) * ratePerSecond)
        }
        lastRefill = max(now, lastRefill ?? now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
