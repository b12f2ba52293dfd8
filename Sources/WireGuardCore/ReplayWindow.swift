/// The receive side's counter check of transport data (RFC 6479's bitmap): a counter is taken once, and only if it
/// is within `size` of the greatest seen so far, so reordered packets pass and replayed or very late ones do not.
///
/// Theory of operation: the bitmap is a ring of 64-bit words covering counters `greatest - size + 1 ... greatest`
/// (one word more than `size`, so that advancing clears whole words). Advancing past `greatest` clears the words
/// between; a counter is accepted when its bit was clear, and its bit is set. The check is made only after the
/// packet's tag has verified, so forged counters cannot move the window.
public struct ReplayWindow: Sendable {
    /// Packets of reordering tolerated (WireGuard's 2,048, less one word as RFC 6479 does).
    public static let size: UInt64 = 2048 - 64
    static let words = 2048 / 64
    private var bitmap = [UInt64](repeating: 0, count: words)
    /// The greatest counter accepted, or nil before the first.
    private(set) var greatest: UInt64?

    public init() {}

    /// Takes `counter` if it is new and within the window: true the first time, false for a replay or one too old.
    public mutating func accept(_ counter: UInt64) -> Bool {
        let index = Int((counter / 64) % UInt64(Self.words))
        let bit = UInt64(1) << (counter % 64)
        if let greatest {
            if counter > greatest {
                let current = greatest / 64
                let target = counter / 64
                let clear = min(target - current, UInt64(Self.words))
                if clear > 0 {
                    for i in 1...clear { bitmap[Int((current + i) % UInt64(Self.words))] = 0 }
                }
                self.greatest = counter
            } else if greatest - counter >= Self.size {
                return false
            }
        } else {
            greatest = counter
        }
        if bitmap[index] & bit != 0 { return false }
        bitmap[index] |= bit
        return true
    }
}
