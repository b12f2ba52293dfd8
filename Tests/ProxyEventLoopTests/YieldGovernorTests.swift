@testable import ProxyEventLoop
import Testing

@Suite("ProxyEventLoop yield governor")
struct YieldGovernorTests {
    static let ms: UInt64 = 1_000_000

    @Test("Quick yields never suspend yielding")
    func quickYieldsKeepYielding() {
        var governor = YieldGovernor()
        var now: UInt64 = 1_000 * Self.ms
        for _ in 0..<10_000 {
            now += 50_000
            governor.recordYield(duration: 500 * 1_000, endingAt: now)
            #expect(governor.allowsYielding(at: now))
        }
    }

    @Test("Four long yields in one window suspend yielding for a second, then it is tried again")
    func longYieldsSuspendForASecond() {
        var governor = YieldGovernor()
        var now: UInt64 = 1_000 * Self.ms
        for _ in 0..<3 {
            now += 3 * Self.ms
            governor.recordYield(duration: 3 * Self.ms, endingAt: now)
            #expect(governor.allowsYielding(at: now))
        }
        now += 2 * Self.ms
        governor.recordYield(duration: 2 * Self.ms, endingAt: now)
        #expect(!governor.allowsYielding(at: now))
        #expect(!governor.allowsYielding(at: now + 999 * Self.ms))
        #expect(governor.allowsYielding(at: now + 1_000 * Self.ms))
    }

    @Test("Long yields spread over windows (three in each 64) do not suspend it")
    func sparseLongYieldsDoNotSuspend() {
        var governor = YieldGovernor()
        var now: UInt64 = 1_000 * Self.ms
        for yield in 0..<(64 * 20) {
            let long = yield % 64 < 3
            let duration = long ? 5 * Self.ms : 100_000
            now += duration
            governor.recordYield(duration: duration, endingAt: now)
            #expect(governor.allowsYielding(at: now), "yield \(yield)")
        }
    }
}
