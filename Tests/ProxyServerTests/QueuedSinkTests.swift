import Foundation
import ProxyTrace
import Testing

@testable import ProxyServer

/// A sink that keeps the notices it gets, and can be held inside `consume` until released.
private final class RecordingSink: LogSink, @unchecked Sendable {
    // @unchecked: `seen` is guarded by `lock`; the semaphores are thread-safe.
    private let lock = NSLock()
    private var seen: [String] = []
    let entered = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let holds: Bool

    init(holds: Bool = false) { self.holds = holds }

    func consume(_ entry: ProxyLog) {
        guard case .notice(let text, _) = entry else { return }
        if holds {
            entered.signal()
            release.wait()
        }
        lock.lock()
        seen.append(text)
        lock.unlock()
    }

    func accepts(_ entry: ProxyLog) -> Bool {
        if case .notice = entry { true } else { false }
    }

    func flush() {}

    var notices: [String] {
        lock.lock()
        defer { lock.unlock() }
        return seen
    }
}

/// Collects the drop counts a `.drop` queue reports.
private final class DropCounts: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var counts: [Int] = []
    func add(_ n: Int) {
        lock.lock()
        counts.append(n)
        lock.unlock()
    }
    var all: [Int] {
        lock.lock()
        defer { lock.unlock() }
        return counts
    }
}

@Suite("Sinks behind a bounded queue, and the fan-out")
struct QueuedSinkTests {
    @Test("Backpressure: a full queue makes the producer wait; every entry arrives, in order")
    func backpressureLosesNothing() throws {
        let sink = RecordingSink()
        let queued = QueuedSink(sink, capacity: 2, overflow: .backpressure, name: "test.backpressure")
        // Four producers at once, as four loop threads would be.
        DispatchQueue.concurrentPerform(iterations: 4) { p in
            for i in 0..<250 { queued.consume(.notice("p\(p)-\(i)")) }
        }
        queued.flush()
        let seen = sink.notices
        #expect(seen.count == 1000)
        for p in 0..<4 {
            #expect(seen.filter { $0.hasPrefix("p\(p)-") } == (0..<250).map { "p\(p)-\($0)" }, "producer \(p) in order")
        }
    }

    @Test("Drop: a full queue drops the new entry, counts it and says so; what was queued still arrives")
    func dropCounts() throws {
        let sink = RecordingSink(holds: true)
        let drops = DropCounts()
        let queued = QueuedSink(sink, capacity: 2, overflow: .drop, name: "test.drop") { drops.add($0) }
        queued.consume(.notice("a"))
        #expect(sink.entered.wait(timeout: .now() + 10) == .success, "the sink thread took the first entry")
        queued.consume(.notice("b"))
        queued.consume(.notice("c"))
        queued.consume(.notice("d"))  // the queue holds b and c: dropped
        #expect(drops.all == [1])
        for _ in 0..<3 { sink.release.signal() }
        queued.flush()
        #expect(sink.notices == ["a", "b", "c"])
    }

    @Test("Entries a sink does not accept never reach its queue")
    func filtered() throws {
        let sink = RecordingSink(holds: true)
        let queued = QueuedSink(sink, capacity: 1, overflow: .drop, name: "test.filter") { _ in
            Issue.record("nothing should be dropped")
        }
        #expect(!queued.accepts(.diagnostics(.init(title: "x"))))
        for _ in 0..<100 { queued.consume(.diagnostics(.init(title: "x"))) }
        queued.flush()
        #expect(sink.notices.isEmpty)
    }

    @Test("A sink added with one line gets every entry the proxy logs")
    func fanOut() throws {
        let fanout = try ProxyLogSink(diagnosticsLevel: 0, jsonPath: nil, quiet: true)
        let sink = RecordingSink()
        fanout.add(sink)
        fanout.write(.notice("one"))
        fanout.write(.notice("two"))
        #expect(sink.notices == ["one", "two"])
    }
}
