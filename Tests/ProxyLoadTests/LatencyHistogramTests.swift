import Testing

@testable import atsproxy_load

@Suite("LatencyHistogram")
struct LatencyHistogramTests {
    @Test("Percentiles of 1…10,000 µs are within 1% of the exact ranks")
    func percentilesOfAUniformSpread() {
        var histogram = LatencyHistogram()
        for micros in 1...10_000 { histogram.record(UInt64(micros) * 1000) }
        for (fraction, exact) in [(0.5, 5_000_000.0), (0.9, 9_000_000.0), (0.99, 9_900_000.0)] {
            let value = Double(histogram.percentile(fraction) ?? 0)
            #expect(abs(value - exact) / exact < 0.01, "p\(Int(fraction * 100)) = \(value)")
        }
        #expect(histogram.count == 10_000)
    }

    @Test("Small values are exact; an empty histogram has no percentiles")
    func exactBelow128AndEmpty() {
        #expect(LatencyHistogram().percentile(0.5) == nil)
        var histogram = LatencyHistogram()
        for value: UInt64 in [3, 7, 100] { histogram.record(value) }
        #expect(histogram.percentile(0.5) == 7)
        #expect(histogram.percentile(1) == 100)
        #expect(histogram.percentile(0) == 3)
    }

    @Test("Every value falls in its bucket, and buckets are at most 1/64 of their values wide")
    func bucketsHoldTheirValues() {
        var value: UInt64 = 1
        for _ in 0..<2000 {
            let (low, width) = LatencyHistogram.bounds(of: LatencyHistogram.index(of: value))
            #expect(low <= value && value - low < width)
            #expect(width == 1 || width * 64 <= low)
            value = value &* 3 / 2 &+ 1
            if value > UInt64.max / 2 { value = 1 }
        }
        let top = LatencyHistogram.bounds(of: LatencyHistogram.index(of: .max))
        #expect(top.low <= .max && .max - top.low < top.width)
    }

    @Test("Merging adds the counts")
    func merge() {
        var a = LatencyHistogram()
        var b = LatencyHistogram()
        for _ in 0..<3 { a.record(1_000) }
        b.record(1_000_000)
        a.merge(b)
        #expect(a.count == 4)
        #expect(a.percentile(0.75) ?? 0 < 1_100)
        #expect(a.percentile(1) ?? 0 > 990_000)
    }
}
