import Testing

@testable import Throttle

/// Seconds the bucket's burst is worth at a rate: what a schedule may gain over size × 8 / rate.
func burstTime(_ bitsPerSecond: Int) -> Double {
    let bucket = LinkShaper.bucket(bitsPerSecond: bitsPerSecond)
    return Double(bucket.burst) / bucket.bytesPerSecond
}

@Suite("A throttle shared by the whole proxy")
struct SharedLinkTests {
    @Test("Two connections on one shared 3G downlink: 2 × 100 KiB take as long as 200 KiB, and both finish together")
    func twoConnectionsShare() {
        let shared = SharedLink(profile: .threeG)
        let a = ConnectionThrottle(profile: .threeG, seed: 1, shared: shared).downlink
        let b = ConnectionThrottle(profile: .threeG, seed: 2, shared: shared).downlink
        let chunks = (0..<(100 / 16 + 1)).map { i in (at: UInt64(0), byteCount: min(16_384, 100 * 1024 - i * 16_384)) }
        var loop = SimulatedLoop([a, b], offers: [chunks, chunks])
        loop.run()
        let total = 200.0 * 1024 * 8 / 780_000 + 0.1  // the 200 KiB figure: 2.2005 s
        #expect(loop.released(0) == 100 * 1024)
        #expect(loop.released(1) == 100 * 1024)
        let last = max(loop.finishedAt(0), loop.finishedAt(1))
        #expect(abs(last - total) <= 0.02 * total, "finished at \(last) s")
        // A fair share: neither got through in much less than the whole (alone, 100 KiB takes 1.15 s).
        #expect(min(loop.finishedAt(0), loop.finishedAt(1)) >= 0.95 * total)
    }

    @Test("Connections with their own buckets do not slow each other")
    func ownBuckets() {
        let a = ConnectionThrottle(profile: .threeG, seed: 1).downlink
        let b = ConnectionThrottle(profile: .threeG, seed: 2).downlink
        let chunks = [(at: UInt64(0), byteCount: 100 * 1024)]
        var loop = SimulatedLoop([a, b], offers: [chunks, chunks])
        loop.run()
        let alone = 100.0 * 1024 * 8 / 780_000 + 0.1
        let tolerance = 0.02 * alone + burstTime(780_000)
        #expect(abs(loop.finishedAt(0) - alone) <= tolerance)
        #expect(abs(loop.finishedAt(1) - alone) <= tolerance)
    }

    @Test("The shared uplink is separate from the shared downlink")
    func directionsSeparate() {
        let shared = SharedLink(profile: .threeG)
        let down = ConnectionThrottle(profile: .threeG, seed: 1, shared: shared).downlink
        let up = ConnectionThrottle(profile: .threeG, seed: 1, shared: shared).uplink
        var loop = SimulatedLoop([down, up], offers: [[(0, 100 * 1024)], [(0, 100 * 1024)]])
        loop.run()
        let downAlone = 100.0 * 1024 * 8 / 780_000 + 0.1
        let upAlone = 100.0 * 1024 * 8 / 330_000 + 0.1
        #expect(abs(loop.finishedAt(0) - downAlone) <= 0.02 * downAlone + burstTime(780_000))
        #expect(abs(loop.finishedAt(1) - upAlone) <= 0.02 * upAlone + burstTime(330_000))
    }

    @Test("A token bucket grants its burst at once, then one reservation per refill, first come first served")
    func bucketOrder() {
        var bucket = TokenBucket(bytesPerSecond: 1_000, burst: 2_000)
        #expect(bucket.reserve(1_000, at: 0) == 0)
        #expect(bucket.reserve(1_000, at: 0) == 0)
        #expect(bucket.reserve(1_000, at: 0) == 1_000_000_000)  // asked first: served first
        #expect(bucket.reserve(1_000, at: 0) == 2_000_000_000)
        // After an idle spell the bucket is full again, but no fuller than its burst.
        #expect(bucket.reserve(2_000, at: 100_000_000_000) == 100_000_000_000)
        #expect(bucket.reserve(1_000, at: 100_000_000_000) == 101_000_000_000)
    }

    @Test("Per connection: the DNS delay comes before the connect; 100% Loss stalls")
    func connection() {
        #expect(ConnectionThrottle(profile: .highLatencyDNS, seed: 0).connectDelay == .seconds(3))
        #expect(ConnectionThrottle(profile: .threeG, seed: 0).connectDelay == .zero)
        #expect(ConnectionThrottle(profile: .totalLoss, seed: 0).stalls)
        #expect(!ConnectionThrottle(profile: .veryBadNetwork, seed: 0).stalls)
    }
}
