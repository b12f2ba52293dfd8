import CLinuxShims

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
    @discardableResult
    public static func keepFreedMemoryForReuse() -> Bool {
        clinux_set_heap_thresholds(trimThreshold, mmapThreshold) == 1
    }
}
