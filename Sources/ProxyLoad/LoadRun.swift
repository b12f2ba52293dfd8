import Dispatch
import Foundation
import ProxyEventLoop

/// Runs a plan: one ``LoadWorker`` per event-loop thread, each with its share of the connections and requests;
/// waits until every worker has finished or the deadline has passed, and adds their tallies up. The calling thread
/// only waits, so the loops' threads are where the client spends its CPU.
enum LoadRun {
    static func run(_ plan: LoadPlan) throws(LoadUsageError) -> LoadReport {
        let group: EventLoopGroup
        do {
            group = try EventLoopGroup(configuration: .init(loopCount: plan.threads))
        } catch {
            throw LoadUsageError("cannot start the event loops: \(error)")
        }
        let collector = TallyCollector()
        let workers = group.loops.enumerated().map { index, loop in
            LoadWorker(loop: loop, assignment: plan.assignment(forLoop: index), onFinish: collector.add)
        }
        let cpuStart = processCPUSeconds()
        let start = monotonicNanoseconds()
        for worker in workers { worker.loop.execute { worker.start() } }

        var stopReason: String?
        let deadline = DispatchTime.now() + .nanoseconds(Int(clamping: nanoseconds(plan.timeout)))
        if !collector.wait(for: workers.count, until: deadline) {
            stopReason = "timed out after \(plan.timeout)"
            for worker in workers { worker.loop.execute { worker.stop() } }
            // A stopped worker reports at once; the bound only guards against a loop that no longer runs.
            _ = collector.wait(for: workers.count, until: .now() + 10)
        }
        let cpuSeconds = processCPUSeconds() - cpuStart
        var tally = LoadTally()
        for part in collector.tallies { tally.merge(part) }
        group.shutdownGracefully(timeout: .seconds(1))
        if stopReason == nil && tally.errors > plan.maxErrors {
            stopReason = "gave up after \(tally.errors) connection errors"
        }
        let end = tally.finishedAt > start ? tally.finishedAt : monotonicNanoseconds()
        return LoadReport(
            tally: tally, requested: plan.requests, seconds: Double(end - start) / 1e9, cpuSeconds: cpuSeconds,
            stopReason: stopReason)
    }

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return seconds < 0 ? 0 : UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000)
    }
}

/// Where workers on the loop threads leave their tallies for the waiting thread.
private final class TallyCollector: Sendable {
    // NSLock rather than Synchronization.Mutex: ThreadSanitizer understands pthread locks, not Mutex's futexes.
    private let lock = NSLock()
    nonisolated(unsafe) private var storage: [LoadTally] = []
    private let arrived = DispatchSemaphore(value: 0)

    @Sendable func add(_ tally: LoadTally) {
        lock.withLock { storage.append(tally) }
        arrived.signal()
    }

    var tallies: [LoadTally] { lock.withLock { storage } }

    /// Waits until `count` tallies have arrived in all, or `deadline`; true when they all did.
    func wait(for count: Int, until deadline: DispatchTime) -> Bool {
        while tallies.count < count {
            if arrived.wait(timeout: deadline) == .timedOut { return tallies.count >= count }
        }
        return true
    }
}
