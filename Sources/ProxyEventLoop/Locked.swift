#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a pthread mutex.
///
/// Used instead of `Synchronization.Mutex`, whose futex-based Linux implementation ThreadSanitizer cannot see: every
/// access under it was reported as a data race, which would hide real races in `swift test --sanitize=thread`.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched between pthread_mutex_lock and unlock.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
