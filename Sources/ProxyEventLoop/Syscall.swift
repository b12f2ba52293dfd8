import CLinuxShims
#if canImport(Glibc)
import Glibc
#endif

/// The one errno policy for every system call (after SwiftNIO's System.swift):
/// - EINTR: the call is retried;
/// - EAGAIN/EWOULDBLOCK: returned as `nil` so the caller waits for readiness;
/// - EBADF/EFAULT: our own bug (a stale fd or a bad pointer), so we stop with a precondition naming the call;
/// - anything else is thrown as `IOError(errno, call)`.
@inline(__always)
func syscall<T: FixedWidthInteger>(_ call: StaticString, _ body: () -> T) throws(IOError) -> T? {
    while true {
        let result = body()
        if result >= 0 { return result }
        let code = errno
        switch code {
        case EINTR:
            continue
        case EAGAIN, EWOULDBLOCK:
            return nil
        case EBADF, EFAULT:
            preconditionFailure("\(call) failed with programmer error errno \(code)")
        default:
            throw IOError(errnoCode: code, call: "\(call)")
        }
    }
}

/// close(2) for an fd we own. EINTR is not retried: on Linux the fd is released even then, and retrying could close an
/// fd reused by another thread.
func closeDescriptor(_ fd: Int32) {
    if Glibc.close(fd) < 0 {
        let code = errno
        precondition(code != EBADF, "close: fd \(fd) was not open (double close)")
    }
}

/// The monotonic clock in nanoseconds, for timer deadlines.
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

extension Duration {
    /// Whole nanoseconds, clamped at zero.
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 { return 0 }
        return UInt64(seconds) &* 1_000_000_000 &+ UInt64(attoseconds / 1_000_000_000)
    }
}
