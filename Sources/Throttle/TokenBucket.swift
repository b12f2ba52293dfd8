// Theory of operation: a token bucket kept as one number, its "theoretical arrival time" (GCRA): the instant at which
// the bucket would be full again if nothing more were taken. Tokens at `now` are `burst - rate * (full - now)`, capped
// at `burst`. A caller does not ask "how many tokens now" but reserves a number of bytes and gets back the instant at
// which they may go; the reservation is committed at once. So callers sharing one bucket are served in the order they
// reserved (first come, first served at the granularity of one reservation), and none can starve another by always
// asking first when a timer fires. Instants are nanoseconds on the caller's clock; the bucket never reads a clock.

/// A token bucket of `bytesPerSecond` with a `burst`, handing out reservations (see the theory of operation).
public struct TokenBucket: Sendable, Equatable {
    /// Bytes per second.
    public let bytesPerSecond: Double
    /// The most bytes that may go at once after an idle spell.
    public let burst: Int
    /// When the bucket is full again, in nanoseconds (0: full from the start).
    private var fullAt: Double = 0

    public init(bytesPerSecond: Double, burst: Int) {
        precondition(bytesPerSecond > 0 && burst > 0, "a token bucket needs a positive rate and burst")
        self.bytesPerSecond = bytesPerSecond
        self.burst = burst
    }

    /// Reserves `byteCount` bytes asked for at `now`; returns the instant (≥ `now`) at which they may go. A reservation
    /// larger than the burst is granted when the bucket has refilled the difference (the bucket runs into debt).
    public mutating func reserve(_ byteCount: Int, at now: UInt64) -> UInt64 {
        let perNanosecond = bytesPerSecond / 1e9
        let t = Double(now)
        let grant = max(t, fullAt - Double(burst - byteCount) / perNanosecond)
        fullAt = max(fullAt, grant) + Double(byteCount) / perNanosecond
        return UInt64(grant.rounded(.up))
    }
}
