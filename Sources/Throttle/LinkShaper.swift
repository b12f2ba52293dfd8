// Theory of operation: the shaper for one direction of one connection, sans-io. It never holds bytes, only counts:
// the caller keeps the data in its own write buffer, tells the shaper how many bytes arrived and when (`offer`), and
// asks what may go (`poll`). `poll` answers with a byte count to write now and, if bytes remain, the instant to ask
// again; the caller arms an event-loop timer for it (never a sleep). Time is the caller's clock in nanoseconds.
//
// Each offered chunk goes through two stages, in order:
//
// 1. The delay line. A chunk becomes eligible at arrival + the direction's one-way delay (+ loss penalties, below),
//    and never before the chunk ahead of it: a TCP stream is delivered in order.
// 2. The token bucket, at the direction's bandwidth (bits / 8 bytes per second), with a small burst. Eligible bytes are
//    reserved from the bucket a quantum at a time (TokenBucket's reservations); a reservation whose instant has come
//    is released. The bucket is the connection's own, or a `SharedTokenBucket` when one throttle covers the whole
//    proxy: connections then share the bandwidth in the order they reserved, a quantum each in turn.
//
// So a download of S bytes offered at once at t0 ends at about t0 + delay + (S - burst) / rate: the figure the tests
// check (3G: 200 KiB in 204800 × 8 / 780000 s + 100 ms ≈ 2.20 s).
//
// Loss. The proxy sees TCP streams, not packets: it cannot drop a packet and let the device's TCP retransmit it, and
// dropping stream bytes would corrupt the stream. What a lost packet costs an app is time: the segment is sent again
// after a fast retransmit (about one round trip) or a retransmission timeout. So each chunk is cut into MSS-sized
// (1460-byte) segments, each lost with the direction's probability (a seeded generator, injected for tests), and every
// lost segment delays its chunk (and, in order, everything behind it) by a retransmission penalty of
// max(round trip, 200 ms), 200 ms being the usual minimum RTO. Penalties add up while the stream is backed up, so a
// download's extra time is (lost segments × penalty) whatever sizes the caller offers bytes in. The retransmitted bytes do not consume bandwidth again:
// an approximation that under-states loss on a saturated link. At 100% loss nothing ever passes: `poll` releases
// nothing and asks for no timer; the connection stalls until the app's own timeout, as with NLC's "100% Loss".

/// What a `poll` allows: write `byteCount` bytes now, and poll again at `wakeAt` (nil: nothing pending, or nothing
/// will ever pass) or when more bytes are offered.
public struct ShaperRelease: Sendable, Equatable {
    public var byteCount: Int
    public var wakeAt: UInt64?

    public init(byteCount: Int, wakeAt: UInt64?) {
        self.byteCount = byteCount
        self.wakeAt = wakeAt
    }
}

/// Shapes one direction of one connection to a `LinkProfile.Direction` (see the theory of operation).
public struct LinkShaper: Sendable {
    /// The segment size losses are drawn per (a typical Ethernet MSS).
    public static let segmentSize = 1460
    /// The least a lost segment costs (a usual minimum retransmission timeout).
    public static let minimumRetransmissionPenalty: Duration = .milliseconds(200)

    private enum Bucket: Sendable {
        case unlimited
        case own(TokenBucket)
        case shared(SharedTokenBucket)
    }

    private struct Chunk: Sendable {
        var eligibleAt: UInt64
        var byteCount: Int
    }

    public let direction: LinkProfile.Direction
    /// What one lost segment adds to its chunk's delay, in nanoseconds.
    public let retransmissionPenalty: UInt64
    /// The most bytes reserved from the bucket at once.
    public let quantum: Int
    private var bucket: Bucket
    private var random: SplitMix64
    private var line: [Chunk] = []
    private var lineStart = 0
    /// Bytes reserved from the bucket and the instant they may go.
    private var reservation: (byteCount: Int, at: UInt64)?
    private var lastEligibleAt: UInt64 = 0

    /// Segments drawn as lost so far (each cost one `retransmissionPenalty`).
    public private(set) var lostSegments = 0
    /// Bytes offered and not yet released.
    public private(set) var pendingBytes = 0

    /// - Parameters:
    ///   - direction: the bandwidth, loss and delay to apply.
    ///   - roundTrip: the link's round trip (both directions' delays), for the loss penalty.
    ///   - seed: the loss generator's seed.
    ///   - shared: a proxy-wide bucket to draw bandwidth from instead of the connection's own; its rate is used in
    ///     place of `direction.bitsPerSecond`.
    public init(
        direction: LinkProfile.Direction, roundTrip: Duration = .zero, seed: UInt64 = 0,
        shared: SharedTokenBucket? = nil
    ) {
        self.direction = direction
        retransmissionPenalty = max(roundTrip, Self.minimumRetransmissionPenalty).nanoseconds
        random = SplitMix64(seed: seed)
        if let shared {
            bucket = .shared(shared)
        } else if let bits = direction.bitsPerSecond {
            bucket = .own(Self.bucket(bitsPerSecond: bits))
        } else {
            bucket = .unlimited
        }
        quantum = direction.bitsPerSecond.map(Self.quantum(bitsPerSecond:)) ?? Self.segmentSize
    }

    /// The reservation size for a rate: 5 ms worth of bytes, at least one segment, so that a slow link is paced a
    /// segment at a time and a fast one does not wake its timer thousands of times a second.
    static func quantum(bitsPerSecond: Int) -> Int {
        max(segmentSize, bitsPerSecond / 8 / 200)
    }

    /// The bucket for a rate: a burst of two quanta (about 10 ms on a fast link, two segments on a slow one).
    static func bucket(bitsPerSecond: Int) -> TokenBucket {
        TokenBucket(bytesPerSecond: Double(bitsPerSecond) / 8, burst: 2 * quantum(bitsPerSecond: bitsPerSecond))
    }

    /// `byteCount` bytes arrived at `now` (the caller appended them to its write buffer). Poll afterwards.
    public mutating func offer(_ byteCount: Int, at now: UInt64) {
        guard byteCount > 0 else { return }
        pendingBytes += byteCount
        guard !direction.dropsEverything else { return }
        // In order behind the chunk ahead; a loss then delays this chunk from there, so that penalties add up while
        // the stream is backed up (whatever the caller's chunk sizes) and start afresh after an idle spell.
        var eligibleAt = max(now &+ direction.delay.nanoseconds, lastEligibleAt)
        if direction.lossPercent > 0 {
            let segments = (byteCount + Self.segmentSize - 1) / Self.segmentSize
            let p = direction.lossPercent / 100
            var lost = 0
            for _ in 0..<segments where Double.random(in: 0..<1, using: &random) < p { lost += 1 }
            lostSegments += lost
            eligibleAt &+= UInt64(lost) &* retransmissionPenalty
        }
        lastEligibleAt = eligibleAt
        line.append(Chunk(eligibleAt: eligibleAt, byteCount: byteCount))
    }

    /// What may be written at `now`, and when to ask again.
    public mutating func poll(at now: UInt64) -> ShaperRelease {
        var released = 0
        defer { pendingBytes -= released }
        while true {
            if let r = reservation {
                guard r.at <= now else { return ShaperRelease(byteCount: released, wakeAt: r.at) }
                released += r.byteCount
                reservation = nil
            }
            guard lineStart < line.count else {
                line.removeAll(keepingCapacity: true)
                lineStart = 0
                return ShaperRelease(byteCount: released, wakeAt: nil)
            }
            let head = line[lineStart]
            guard head.eligibleAt <= now else { return ShaperRelease(byteCount: released, wakeAt: head.eligibleAt) }
            let n: Int
            switch bucket {
            case .unlimited:
                n = head.byteCount
                released += n
            case .own(var b):
                n = min(quantum, head.byteCount)
                reservation = (n, b.reserve(n, at: now))
                bucket = .own(b)
            case .shared(let b):
                n = min(quantum, head.byteCount)
                reservation = (n, b.reserve(n, at: now))
            }
            if n == head.byteCount {
                lineStart += 1
                if lineStart > 64, lineStart * 2 > line.count {
                    line.removeFirst(lineStart)
                    lineStart = 0
                }
            } else {
                line[lineStart].byteCount -= n
            }
        }
    }
}
