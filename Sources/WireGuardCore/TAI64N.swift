/// A TAI64N timestamp (12 bytes, big-endian seconds from 1970 offset by 2^62 + 10, then nanoseconds), what an
/// initiation carries so that the responder can refuse a replayed one: each must be greater than the last.
public struct TAI64N: Sendable, Comparable {
    public let bytes: [UInt8]

    /// The timestamp of `nanoseconds` since 1970 (the wall clock, injected).
    public init(unixNanoseconds: UInt64) {
        let seconds = 0x4000_0000_0000_000A &+ unixNanoseconds / 1_000_000_000
        let nanos = UInt32(unixNanoseconds % 1_000_000_000)
        bytes =
            (0..<8).reversed().map { UInt8(truncatingIfNeeded: seconds >> (8 * $0)) }
            + (0..<4).reversed().map { UInt8(truncatingIfNeeded: nanos >> (8 * $0)) }
    }

    init?(bytes: [UInt8]) {
        guard bytes.count == 12 else { return nil }
        self.bytes = bytes
    }

    /// The smallest timestamp: every real one is greater.
    static let zero = TAI64N(bytes: [UInt8](repeating: 0, count: 12))!

    public static func < (a: TAI64N, b: TAI64N) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
}
