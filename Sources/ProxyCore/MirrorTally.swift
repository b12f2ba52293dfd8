import Foundation
import ProxyTrace

/// `--ats mirror`: what the devices did with the mirrored connections (`MirrorCounts`), for the summary at exit.
/// Thread-safe: every loop thread counts into the one tally.
public final class MirrorTally: @unchecked Sendable {
    // @unchecked: every access to `counts` holds `lock`.
    private let lock = NSLock()
    private var counts = MirrorCounts()

    /// Counts one connection's device verdict; `agreed` is nil when no plist is loaded (nothing to compare).
    func count(kind: String, deviceAccepted: Bool, agreed: Bool?) {
        lock.lock()
        defer { lock.unlock() }
        counts.count(kind: kind, deviceAccepted: deviceAccepted, agreed: agreed)
    }

    /// The counts so far.
    public var snapshot: MirrorCounts {
        lock.lock()
        defer { lock.unlock() }
        return counts
    }

    /// The counts by kind, in name order.
    public var byKind: [(kind: String, count: MirrorCounts.Count)] { snapshot.byKind }

    /// The summary printed at exit, or nil when no connection was mirrored. `compared`: a plist was loaded.
    public func summary(compared: Bool) -> String? { snapshot.summary(compared: compared) }
}
