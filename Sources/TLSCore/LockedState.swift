import Foundation

/// A value guarded by an `NSLock`, for the caches several loop threads share (leaf minting, TLS sessions).
///
/// Not `Synchronization.Mutex`: its futex-based Linux implementation is invisible to ThreadSanitizer, which then
/// reports every access under it as a race (seen: `LeafMinter`'s cache, in `scripts/sanitize thread`, now and then).
/// `NSLock` is a pthread mutex, which TSan understands. ProxyEventLoop's `Locked` does the same for its module.
final class LockedState<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched between lock() and unlock().
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
