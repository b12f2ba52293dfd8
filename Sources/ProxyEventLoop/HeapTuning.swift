import CLinuxShims
import Synchronization

/// Process-wide allocator settings for a proxy that relays large bodies.
public enum HeapTuning {
    /// Free memory glibc may keep at the top of each heap instead of giving it back to the kernel.
    public static let trimThreshold: Int32 = 4 * 1024 * 1024
    /// Allocations from this size up get their own mapping instead of heap memory.
    public static let mmapThreshold: Int32 = 4 * 1024 * 1024

    /// Relaying a download allocates and frees arrays as large as a socket read (up to 256 KiB: decrypted records,
    /// ciphertext to send). With glibc's defaults a free can hand the top of a loop thread's heap back to the kernel
    /// (`madvise`, which flushes the TLB on every core the process runs on) and the next allocation faults the pages
    /// in again. Keeping up to 4 MiB per heap lets the memory serve the next read. Fixed thresholds also stop glibc
    /// from raising the mmap threshold on its own, so blocks above 4 MiB still go back to the kernel when freed.
    /// Returns false if glibc refused a setting.
    ///
    /// It also turns on `trimsAfterQuiet`: the free pages left inside the heaps when connections go quiet are given
    /// back to the kernel, at most five times a second per loop.
    @discardableResult
    public static func keepFreedMemoryForReuse() -> Bool {
        trimsAfterQuiet.store(true, ordering: .relaxed)
        return clinux_set_heap_thresholds(trimThreshold, mmapThreshold) == 1
    }

    /// How long a loop waits after a connection's quiet notice before trimming (and so at most how often it trims):
    /// short enough that a connection's memory is back within half a second of its last byte (quiet notice at
    /// 250 ms), long enough that a burst of notices costs one trim.
    static let trimDelay: Duration = .milliseconds(200)

    /// Whether loops trim the heap after quiet notices (set by `keepFreedMemoryForReuse`, i.e. by `atsproxy run`).
    static let trimsAfterQuiet = Atomic<Bool>(false)

    /// Gives the free whole pages inside the heaps back to the kernel, keeping `trimThreshold` at the top of each.
    ///
    /// Why: a quiet connection frees its TLS record buffers (some 17 KiB each way and leg) and the handshake's
    /// temporaries, but an idle connection's long-lived objects are allocated around them, so the freed pages sit
    /// inside the heap where the trim threshold (which only looks at the top) never returns them. Measured with
    /// 1 000 idle intercepted connections (`abtest.py --case idle`): 41 KiB of RSS per connection without, 38 with;
    /// a trim took 39 µs (median; 1.2 ms at most) with 5 000 held. Keeping `trimThreshold` at the top preserves
    /// what `keepFreedMemoryForReuse` is for (a download's next read reuses that memory without faulting it in).
    static func releaseFreePages() {
        _ = clinux_trim_heap(Int(trimThreshold))
    }
}
