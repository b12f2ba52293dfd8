import ATSPolicy
import Foundation

/// What a side connection learnt about a tunnelled pinned host's chain, judged against the app's pins.
struct PinCheckResult: Sendable {
    /// Pin mismatches (empty when the chain matches the pins).
    var violations: [ATSViolation]
    /// The chain's SPKI-SHA256 hashes, leaf first (empty when no certificate was received).
    var found: [String]
    /// Why the pins could not be checked (no connection, no certificate), nil when they were.
    var uncheckedReason: String?
    /// When it was learnt (the session's clock).
    var checkedAt: Double
}

/// Pin checks per origin, reused for `lifetime` seconds as the upstream TLS sessions are (10 minutes): a device
/// opens many tunnels to the same pinned host, and one side connection tells for all. Shared by every loop thread;
/// bounded (cleared when full).
final class PinCheckCache: @unchecked Sendable {
    // @unchecked: `results` is only touched under `lock`.
    private let lock = NSLock()
    private var results: [String: PinCheckResult] = [:]
    private let capacity = 1024
    static let lifetime = 600.0

    func result(host: String, port: Int, now: Double) -> PinCheckResult? {
        lock.lock()
        defer { lock.unlock() }
        guard let r = results["\(host):\(port)"], now - r.checkedAt < Self.lifetime else { return nil }
        return r
    }

    /// Stores `result`; returns true when the origin had no live result yet (its notice is then due).
    @discardableResult
    func store(_ result: PinCheckResult, host: String, port: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if results.count >= capacity { results.removeAll(keepingCapacity: true) }
        let key = "\(host):\(port)"
        let fresh = results[key].map { result.checkedAt - $0.checkedAt >= Self.lifetime } ?? true
        results[key] = result
        return fresh
    }
}
