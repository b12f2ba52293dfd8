import ProxyTrace
import Testing

@Suite("Repeated notices are folded")
struct RepeatedNoticeFilterTests {
    let untrusted = "api.test:443: the client's TLS handshake failed: unknown CA"

    @Test func aNoticeIsShownOnceAMinuteWithTheCountOfTheTimesItWasNot() {
        var filter = RepeatedNoticeFilter(interval: 60)
        #expect(filter.admit(untrusted, now: 0) == [untrusted])
        #expect(filter.admit(untrusted, now: 1) == [])
        #expect(filter.admit(untrusted, now: 59.9) == [])
        #expect(filter.admit(untrusted, now: 60) == [untrusted + " [and 2 more times since it was last shown]"])
        // Shown again: the next minute starts from zero.
        #expect(filter.admit(untrusted, now: 61) == [])
        #expect(filter.admit(untrusted, now: 121) == [untrusted + " [and 1 more time since it was last shown]"])
        #expect(filter.admit(untrusted, now: 500) == [untrusted])
    }

    /// What `StandardErrorSink` does on the loop thread before queueing: a repeat it folds there counts as one that
    /// `admit` folded, and one it does not fold is left to `admit` untouched.
    @Test func foldingBeforeAdmittingCountsTheSameRepeats() {
        var filter = RepeatedNoticeFilter(interval: 60)
        var folded = filter.foldIfShownRecently(untrusted, now: 0)
        #expect(!folded)  // never shown: to be admitted
        #expect(filter.admit(untrusted, now: 0) == [untrusted])
        folded = filter.foldIfShownRecently(untrusted, now: 1)
        #expect(folded)
        #expect(filter.admit(untrusted, now: 2) == [])  // queued before the first was shown: admit folds it
        folded = filter.foldIfShownRecently(untrusted, now: 59.9)
        #expect(folded)
        folded = filter.foldIfShownRecently(untrusted, now: 60)
        #expect(!folded)  // the interval is over: to be shown, with the count
        #expect(filter.admit(untrusted, now: 60) == [untrusted + " [and 3 more times since it was last shown]"])
        folded = filter.foldIfShownRecently("of a kind, other text", kind: "k", now: 61)
        #expect(!folded)
        #expect(filter.admit("first of the kind", kind: "k", now: 61) == ["first of the kind"])
        folded = filter.foldIfShownRecently("of a kind, other text", kind: "k", now: 62)
        #expect(folded)
        #expect(filter.drain() == ["first of the kind [and 1 more like it since it was last shown]"])
    }

    @Test func differentNoticesAreFoldedSeparately() {
        var filter = RepeatedNoticeFilter(interval: 60)
        let other = "old.test:443: the tunnelled server offers nothing newer than TLS 1.0"
        #expect(filter.admit(untrusted, now: 0) == [untrusted])
        #expect(filter.admit(other, now: 1) == [other])
        #expect(filter.admit(untrusted, now: 2) == [])
        #expect(filter.admit(other, now: 3) == [])
    }

    /// Malformed ClientHellos each carry their own parser detail: folded by text, 1,000 of them were 1,000 lines.
    @Test func noticesOfOneKindFoldTogetherWhateverTheirText() {
        var filter = RepeatedNoticeFilter(interval: 60)
        func hello(_ n: Int) -> String { "h\(n).test:443: unreadable TLS ClientHello from the client (byte \(n)); closing" }
        #expect(filter.admit(hello(0), kind: "unreadable ClientHello", now: 0) == [hello(0)])
        for n in 1...999 { #expect(filter.admit(hello(n), kind: "unreadable ClientHello", now: 1).isEmpty) }
        // Another kind, or a notice without one, is not folded with them.
        #expect(filter.admit(untrusted, now: 2) == [untrusted])
        #expect(filter.admit(hello(1000), kind: "unreadable ClientHello", now: 61)
            == [hello(1000) + " [and 999 more like it since it was last shown]"])
        #expect(filter.admit(hello(1001), kind: "unreadable ClientHello", now: 62).isEmpty)
        #expect(filter.drain() == [hello(1000) + " [and 1 more like it since it was last shown]"])
    }

    @Test func drainReportsTheFoldedCountsOnceInTheOrderShown() {
        var filter = RepeatedNoticeFilter(interval: 60)
        let other = "b.test: TLS error from the upstream"
        _ = filter.admit(untrusted, now: 0)
        _ = filter.admit(other, now: 1)
        _ = filter.admit("shown once, never repeated", now: 2)
        for t in 3..<6 { _ = filter.admit(other, now: Double(t)) }
        _ = filter.admit(untrusted, now: 7)
        #expect(filter.drain() == [
            untrusted + " [and 1 more time since it was last shown]",
            other + " [and 3 more times since it was last shown]",
        ])
        #expect(filter.drain() == [])
    }

    @Test func beyondItsCapacityItForgetsTheLongestUnseenAndReportsItsCount() {
        var filter = RepeatedNoticeFilter(interval: 60, capacity: 2)
        _ = filter.admit("a", now: 0)
        _ = filter.admit("a", now: 1)
        _ = filter.admit("b", now: 2)
        // "a" was seen longest ago: forgotten, with its folded repeat reported before the new notice.
        #expect(filter.admit("c", now: 3) == ["a [and 1 more time since it was last shown]", "c"])
        #expect(filter.admit("a", now: 4) == ["a"])
    }
}
