import Testing

@testable import Throttle

/// Runs shapers as an event loop would, on a simulated clock: each is polled after bytes are offered to it and again
/// at the instant it asked for (its timer), ties in the order the timers were armed. No sleeps.
struct SimulatedLoop {
    struct Release: Equatable {
        var at: UInt64
        var byteCount: Int
    }

    var shapers: [LinkShaper]
    /// Per shaper, the bytes offered and when.
    var offers: [[(at: UInt64, byteCount: Int)]]
    private(set) var releases: [[Release]]

    init(_ shapers: [LinkShaper], offers: [[(at: UInt64, byteCount: Int)]]) {
        self.shapers = shapers
        self.offers = offers.map { $0.sorted { $0.at < $1.at } }
        releases = Array(repeating: [], count: shapers.count)
    }

    /// Runs until nothing is pending or asked for, or `limit` (nanoseconds) passes.
    mutating func run(limit: UInt64 = 3_600 * 1_000_000_000) {
        // (instant, sequence, shaper): the timers armed, in firing order.
        var timers: [(at: UInt64, seq: Int, index: Int)] = []
        var seq = 0
        var armed: [UInt64?] = Array(repeating: nil, count: shapers.count)
        var nextOffer = Array(repeating: 0, count: shapers.count)
        while true {
            let offerAt = offers.indices.compactMap { i in nextOffer[i] < offers[i].count ? offers[i][nextOffer[i]].at : nil }.min()
            let timerAt = timers.map(\.at).min()
            guard let now = [offerAt, timerAt].compactMap({ $0 }).min(), now <= limit else { return }
            var toPoll: [Int] = []
            for i in offers.indices {
                while nextOffer[i] < offers[i].count, offers[i][nextOffer[i]].at == now {
                    shapers[i].offer(offers[i][nextOffer[i]].byteCount, at: now)
                    nextOffer[i] += 1
                    if !toPoll.contains(i) { toPoll.append(i) }
                }
            }
            let due = timers.filter { $0.at == now }.sorted { $0.seq < $1.seq }
            timers.removeAll { $0.at == now }
            for t in due where !toPoll.contains(t.index) { toPoll.append(t.index) }
            for i in toPoll {
                let r = shapers[i].poll(at: now)
                if r.byteCount > 0 { releases[i].append(Release(at: now, byteCount: r.byteCount)) }
                if let wake = r.wakeAt, wake != armed[i] || !timers.contains(where: { $0.index == i }) {
                    #expect(wake > now, "a shaper must not ask to be polled again at the same instant")
                    timers.removeAll { $0.index == i }
                    timers.append((wake, seq, i))
                    seq += 1
                    armed[i] = wake
                } else if r.wakeAt == nil {
                    timers.removeAll { $0.index == i }
                    armed[i] = nil
                }
            }
        }
    }

    func released(_ i: Int) -> Int { releases[i].reduce(0) { $0 + $1.byteCount } }
    func finishedAt(_ i: Int) -> Double { Double(releases[i].last?.at ?? 0) / 1e9 }
}

let ms: UInt64 = 1_000_000
let second: UInt64 = 1_000_000_000

/// `size` bytes offered at t = 0 in 16 KiB chunks (a fast server), shaped by `direction`.
func download(_ size: Int, _ direction: LinkProfile.Direction, roundTrip: Duration = .zero, seed: UInt64 = 1)
    -> SimulatedLoop
{
    var chunks: [(at: UInt64, byteCount: Int)] = []
    var left = size
    while left > 0 {
        chunks.append((0, min(16_384, left)))
        left -= 16_384
    }
    var loop = SimulatedLoop([LinkShaper(direction: direction, roundTrip: roundTrip, seed: seed)], offers: [chunks])
    loop.run()
    return loop
}

@Suite("The traffic shaper's schedule, on an injected clock")
struct LinkShaperTests {
    @Test("3G: a 200 KiB download takes 200 × 1024 × 8 / 780000 s plus 100 ms, within 2%")
    func threeGDownload() {
        let loop = download(200 * 1024, LinkProfile.threeG.downlink)
        let expected = 200.0 * 1024 * 8 / 780_000 + 0.1  // 2.2005 s
        #expect(loop.released(0) == 200 * 1024)
        #expect(abs(loop.finishedAt(0) - expected) <= 0.02 * expected, "took \(loop.finishedAt(0)) s")
        // Nothing before the one-way delay.
        #expect(loop.releases[0].first?.at == 100 * ms)
    }

    @Test("The release never outruns the rate: by any instant t, at most burst + rate × (t − delay) bytes went")
    func rateBound() {
        let direction = LinkProfile.threeG.downlink
        let loop = download(200 * 1024, direction)
        let bucket = LinkShaper.bucket(bitsPerSecond: 780_000)
        var total = 0
        for r in loop.releases[0] {
            total += r.byteCount
            let allowed = Double(bucket.burst) + bucket.bytesPerSecond * Double(r.at - 100 * ms) / 1e9
            #expect(Double(total) <= allowed + 1, "at \(r.at) ns: \(total) bytes")
        }
    }

    /// Profile, direction, size, expected seconds (size × 8 / rate + one-way delay).
    static let schedules: [(String, Bool, Int, Double)] = [
        ("3G", true, 200 * 1024, 200 * 1024 * 8 / 780_000 + 0.100),
        ("3G", false, 200 * 1024, 200 * 1024 * 8 / 330_000 + 0.100),
        ("Edge", true, 100 * 1024, 100 * 1024 * 8 / 240_000 + 0.400),
        ("Edge", false, 100 * 1024, 100 * 1024 * 8 / 200_000 + 0.440),
        ("DSL", true, 1024 * 1024, 1024 * 1024 * 8 / 2_000_000 + 0.005),
        ("DSL", false, 200 * 1024, 200 * 1024 * 8 / 256_000 + 0.005),
        ("LTE", true, 8 * 1024 * 1024, 8 * 1024 * 1024 * 8 / 50_000_000 + 0.050),
        ("LTE", false, 4 * 1024 * 1024, 4 * 1024 * 1024 * 8 / 10_000_000 + 0.065),
        ("Wi-Fi", true, 8 * 1024 * 1024, 8 * 1024 * 1024 * 8 / 40_000_000 + 0.001),
        ("Wi-Fi 802.11ac", false, 8 * 1024 * 1024, 8 * 1024 * 1024 * 8 / 100_000_000 + 0.001),
    ]

    @Test("Each profile, each direction: size × 8 / rate + delay, within 2% plus one burst", arguments: schedules)
    func schedule(profile: String, down: Bool, size: Int, expected: Double) throws {
        let p = try #require(LinkProfile.preset(named: profile))
        let direction = down ? p.downlink : p.uplink
        let loop = download(size, direction)
        let bucket = LinkShaper.bucket(bitsPerSecond: try #require(direction.bitsPerSecond))
        let tolerance = 0.02 * expected + Double(bucket.burst) / bucket.bytesPerSecond
        #expect(loop.released(0) == size)
        #expect(abs(loop.finishedAt(0) - expected) <= tolerance, "\(profile) \(down ? "down" : "up"): \(loop.finishedAt(0)) s")
    }

    @Test("A slow server's chunks each leave at their arrival plus the delay, in order")
    func delayLine() {
        let offers = (0..<10).map { (at: UInt64($0) * 150 * ms, byteCount: 1_000) }
        var loop = SimulatedLoop([LinkShaper(direction: LinkProfile.threeG.downlink)], offers: [offers])
        loop.run()
        #expect(loop.releases[0].map(\.at) == offers.map { $0.at + 100 * ms })
        #expect(loop.released(0) == 10_000)
    }

    @Test("Unlimited bandwidth with a delay: everything leaves exactly one delay later")
    func unlimitedWithDelay() throws {
        var shaper = LinkShaper(direction: try LinkProfile(parsing: "latency=250ms").downlink)
        shaper.offer(1_000_000, at: 5 * ms)
        #expect(shaper.poll(at: 5 * ms) == ShaperRelease(byteCount: 0, wakeAt: 255 * ms))
        #expect(shaper.poll(at: 254 * ms) == ShaperRelease(byteCount: 0, wakeAt: 255 * ms))
        #expect(shaper.poll(at: 255 * ms) == ShaperRelease(byteCount: 1_000_000, wakeAt: nil))
        #expect(shaper.pendingBytes == 0)
    }

    @Test("An unconditioned direction passes bytes at once")
    func unconditioned() {
        var shaper = LinkShaper(direction: LinkProfile.highLatencyDNS.downlink)
        shaper.offer(4096, at: 7)
        #expect(shaper.poll(at: 7) == ShaperRelease(byteCount: 4096, wakeAt: nil))
    }

    @Test("100% Loss: nothing ever passes and no timer is asked for; the bytes stay pending")
    func totalLoss() {
        var shaper = LinkShaper(direction: LinkProfile.totalLoss.downlink)
        shaper.offer(1_000, at: 0)
        #expect(shaper.poll(at: 0) == ShaperRelease(byteCount: 0, wakeAt: nil))
        #expect(shaper.poll(at: 3_600 * second) == ShaperRelease(byteCount: 0, wakeAt: nil))
        #expect(shaper.pendingBytes == 1_000)
    }

    @Test("Loss: each lost segment delays the stream by the retransmission penalty, drawn per 1460-byte segment")
    func lossPenalty() throws {
        // Unlimited bandwidth isolates the penalty: completion = delay + lost × max(round trip, 200 ms).
        let p = try LinkProfile(parsing: "latency=100ms,loss=10%")
        let loop = download(1460 * 1000, p.downlink, roundTrip: p.roundTrip, seed: 42)
        let lost = loop.shapers[0].lostSegments
        // 1000 segments at 10%: the binomial's 99.99% band is well inside 60…140.
        #expect((60...140).contains(lost), "lost \(lost)")
        #expect(loop.releases[0].last?.at == 100 * ms + UInt64(lost) * 200 * ms)
        #expect(loop.released(0) == 1460 * 1000)
    }

    @Test("Loss is reproducible from the seed, and differs between seeds")
    func lossSeeded() {
        let d = LinkProfile.veryBadNetwork.downlink
        let rtt = LinkProfile.veryBadNetwork.roundTrip
        let a = download(256 * 1024, d, roundTrip: rtt, seed: 7)
        let b = download(256 * 1024, d, roundTrip: rtt, seed: 7)
        #expect(a.releases == b.releases)
        let lostPerSeed = Set((1...8).map { download(256 * 1024, d, roundTrip: rtt, seed: $0).shapers[0].lostSegments })
        #expect(lostPerSeed.count > 1)
    }

    @Test("Very Bad Network: 1 Mbit/s plus one second (the round trip) per lost segment")
    func veryBadNetwork() {
        let p = LinkProfile.veryBadNetwork
        let loop = download(256 * 1024, p.downlink, roundTrip: p.roundTrip, seed: 3)
        let lost = Double(loop.shapers[0].lostSegments)
        let transfer = 256.0 * 1024 * 8 / 1_000_000
        // At least the penalties plus the delay; at most that plus the whole transfer (penalties and transfer overlap).
        #expect(loop.finishedAt(0) >= 0.5 + lost * 1.0)
        #expect(loop.finishedAt(0) <= 0.5 + lost * 1.0 + transfer * 1.02 + 0.01)
        #expect(lost > 0)
    }
}
