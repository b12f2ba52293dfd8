/// SplitMix64: a small deterministic generator, so that a robustness test that fails names a seed that reproduces it.
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<n` (0 when `n` is 0 or 1).
    public mutating func below(_ n: Int) -> Int { n <= 1 ? 0 : Int(next() % UInt64(n)) }

    /// True `percent` times in a hundred.
    public mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

    public mutating func pick<T>(_ items: [T]) -> T { items[below(items.count)] }

    public mutating func byte() -> UInt8 { UInt8(truncatingIfNeeded: next()) }
}

/// Mutates valid protocol messages into the malformed ones a hostile peer could send: bit flips, inserted, deleted
/// and duplicated bytes, splices of two messages, boundary numbers (`ffffffffffffffffff`, `99999999999999999999`),
/// CR/LF/NUL/obs-fold bytes, long lines and many fields.
public enum ByteMutator {
    /// Byte strings that sit on the edges of HTTP/1 parsing.
    public static let tokens: [[UInt8]] =
        [
            "\r\n", "\n", "\r", "\0", " ", "\t", ":", ";", ",", "\r\n\r\n", "\r\n ", "\r\n\t", "0\r\n\r\n",
            "ffffffffffffffffff", "7fffffffffffffff", "99999999999999999999", "9223372036854775808", "-1", "+1",
            "Content-Length: 99999999999999999999\r\n", "Content-Length: 1, 2\r\n", "Transfer-Encoding: chunked\r\n",
            "Transfer-Encoding: gzip, chunked\r\n", "Connection: close\r\n", "Upgrade: websocket\r\n",
            "Expect: 100-continue\r\n", "Host: a\r\n", "HTTP/1.1 ", "HTTP/1.0", "HTTP/9.9", "CONNECT ", "http://",
            "[::1]", "[", "]", ":65536", ":", "@", "#", "?", "%", "*", "\u{7F}", "100 ", "101 ", "204 ", "999 ",
            ";ext=\"v\"", "X: y\r\n", "é",
        ].map { Array($0.utf8) } + [[0x80], [0xFF], [0x16, 0x03, 0x01]]

    /// Numbers just inside and just outside what 64-bit lengths, chunk sizes, statuses and ports can hold.
    static let boundaryNumbers: [[UInt8]] = [
        "0", "1", "-1", "", "65535", "65536", "7fffffffffffffff", "8000000000000000", "ffffffffffffffffff",
        "9223372036854775807", "9223372036854775808", "99999999999999999999", "000000000000000000001",
    ].map { Array($0.utf8) }

    private static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// `input` after `count` random mutations; `partners` are spliced in.
    public static func mutate(
        _ input: [UInt8], count: Int, partners: [[UInt8]], using rng: inout SplitMix64
    ) -> [UInt8] {
        var d = input
        for _ in 0..<count {
            let at = rng.below(d.count + 1)
            let some = d.isEmpty ? 0 : rng.below(d.count)
            switch rng.below(14) {
            case 0 where !d.isEmpty:
                d[some] ^= 1 << UInt8(rng.below(8))
            case 1 where !d.isEmpty:
                d[some] = rng.byte()
            case 2:
                d.insert(contentsOf: (0...rng.below(4)).map { _ in rng.byte() }, at: at)
            case 3 where !d.isEmpty:
                d.removeSubrange(some..<min(d.count, some + 1 + rng.below(16)))
            case 4 where !d.isEmpty:
                d.insert(contentsOf: d[some..<min(d.count, some + 1 + rng.below(64))], at: some)
            case 5, 6, 7:
                d.insert(contentsOf: rng.pick(tokens), at: at)
            case 8 where !partners.isEmpty:
                let partner = rng.pick(partners)
                d = Array(d[..<at]) + partner[rng.below(partner.count + 1)...]
            case 9:
                let byte: UInt8 = rng.pick([0x41, 0x20, 0x30, 0x66, 0x0A, 0x0D, 0x00])
                d.insert(contentsOf: repeatElement(byte, count: 1 + rng.below(rng.chance(10) ? 10_000 : 100)), at: at)
            case 10:
                var lines: [UInt8] = []
                for i in 0..<(1 + rng.below(rng.chance(20) ? 300 : 20)) { lines += Array("X-\(i): v\r\n".utf8) }
                d.insert(contentsOf: lines, at: at)
            case 11, 12:
                // A number (a length, a chunk size, a status, a port) becomes a boundary value.
                guard let first = d[some...].firstIndex(where: isDigit) ?? d.firstIndex(where: isDigit) else { break }
                let end = d[first...].firstIndex { !isDigit($0) } ?? d.endIndex
                d.replaceSubrange(first..<end, with: rng.pick(boundaryNumbers))
            default:
                d.removeSubrange(at...)
            }
        }
        return d
    }

    /// `data` cut into the pieces successive reads could return: whole, one byte at a time, or random sizes. Long
    /// inputs come in larger pieces: a head of many kilobytes read a few bytes at a time costs a parser's incomplete
    /// head checks time quadratic in its length, which a bounded test cannot afford.
    public static func pieces(of data: [UInt8], using rng: inout SplitMix64) -> [[UInt8]] {
        guard !data.isEmpty else { return [] }
        switch rng.below(4) {
        case 0: return [data]
        case 1 where data.count <= 512: return data.map { [$0] }
        default:
            let largest = data.count > 2_048 ? 700 : rng.pick([3, 40, 700])
            var result: [[UInt8]] = []
            var i = 0
            while i < data.count {
                let n = 1 + rng.below(largest)
                result.append(Array(data[i..<min(data.count, i + n)]))
                i += n
            }
            return result
        }
    }
}
