import ATSPolicy
import Foundation

/// The policy's pre-connect verdicts, remembered per target. The policy cannot change while the proxy runs, and a
/// plain-HTTP client asks it on every request: host matching, IP-literal parsing and the notes that explain the
/// decision cost more than the rest of relaying the request. Bounded: cleared when full.
final class RequirementsCache: @unchecked Sendable {
    // @unchecked: every access to `verdicts` holds `lock`.
    private let lock = NSLock()
    private var verdicts: [ConnectionTarget: PreConnectVerdict] = [:]
    private let capacity = 4_096

    func verdict(for target: ConnectionTarget, evaluate: () -> PreConnectVerdict) -> PreConnectVerdict {
        lock.lock()
        if let known = verdicts[target] {
            lock.unlock()
            return known
        }
        lock.unlock()
        let verdict = evaluate()
        lock.lock()
        defer { lock.unlock() }
        if verdicts.count >= capacity { verdicts.removeAll(keepingCapacity: true) }
        verdicts[target] = verdict
        return verdict
    }
}
