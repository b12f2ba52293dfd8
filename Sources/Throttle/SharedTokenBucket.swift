#if canImport(Glibc)
import Glibc
#endif

/// One token bucket shared by every connection a proxy-wide throttle covers (one per direction), possibly from
/// several event loops: each reservation takes a lock for the few instructions it lasts.
public final class SharedTokenBucket: @unchecked Sendable {
    // @unchecked Sendable: `bucket` is only touched between pthread_mutex_lock and unlock (a pthread mutex, as
    // ProxyEventLoop's Locked, so that ThreadSanitizer sees it).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var bucket: TokenBucket

    public init(_ bucket: TokenBucket) {
        self.bucket = bucket
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    /// A bucket at the rate of `bitsPerSecond` with the shaper's usual burst.
    public convenience init(bitsPerSecond: Int) {
        self.init(LinkShaper.bucket(bitsPerSecond: bitsPerSecond))
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// As `TokenBucket.reserve(_:at:)`.
    public func reserve(_ byteCount: Int, at now: UInt64) -> UInt64 {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return bucket.reserve(byteCount, at: now)
    }
}
