import Inflate
import Testing

/// Fixtures made with Python's zlib and gzip modules (`gzip.compress(data, mtime=0)`, `zlib.compress(data)`, a raw
/// `compressobj(9, DEFLATED, -15)`) of "hello, inflate! " four times, and of 100,000 zero bytes.
@Suite struct InflateTests {
    static let text = Array(String(repeating: "hello, inflate! ", count: 4).utf8)
    static let gzip = hex("1f8b0800000000000203cb48cdc9c9d751c8cc4bcb492c495554c820910f00de5dcec740000000")
    static let zlib = hex("789ccb48cdc9c9d751c8cc4bcb492c495554c820910f00d95e1611")
    static let raw = hex("cb48cdc9c9d751c8cc4bcb492c495554c820910f00")
    static let zeros = hex("edc13101000000c2a0f54f6d0d0fa0" + String(repeating: "00", count: 96) + "805703")

    @Test func eachFormatInflatesToTheOriginal() throws {
        #expect(try Inflate.inflate(Self.gzip, format: .gzip, limit: 1 << 20) == Self.text)
        #expect(try Inflate.inflate(Self.zlib, format: .zlib, limit: 1 << 20) == Self.text)
        #expect(try Inflate.inflate(Self.raw, format: .raw, limit: 1 << 20) == Self.text)
        let zeros = try Inflate.inflate(Self.zeros, format: .raw, limit: 1 << 20)
        #expect(zeros.count == 100_000 && zeros.allSatisfy { $0 == 0 })
    }

    /// Every proper prefix is cut short: an error at once, never a wait for input that will not come.
    @Test(.timeLimit(.minutes(1)))
    func aStreamCutAnywhereIsTruncated() {
        for (data, format) in [(Self.gzip, Inflate.Format.gzip), (Self.zlib, .zlib), (Self.raw, .raw)] {
            for cut in 0..<data.count {
                #expect(throws: Inflate.Failure.truncated, "cut at \(cut) of \(data.count)") {
                    try Inflate.inflate(Array(data[0..<cut]), format: format, limit: 1 << 20)
                }
            }
        }
    }

    @Test func aChecksumThatDoesNotMatchIsCorrupt() {
        var gzip = Self.gzip
        gzip[gzip.count - 8] ^= 0x01  // CRC-32
        #expect(throws: Inflate.Failure.corrupt) { try Inflate.inflate(gzip, format: .gzip, limit: 1 << 20) }
        var length = Self.gzip
        length[length.count - 4] ^= 0x01  // ISIZE
        #expect(throws: Inflate.Failure.corrupt) { try Inflate.inflate(length, format: .gzip, limit: 1 << 20) }
        var zlib = Self.zlib
        zlib[zlib.count - 1] ^= 0x01  // Adler-32
        #expect(throws: Inflate.Failure.corrupt) { try Inflate.inflate(zlib, format: .zlib, limit: 1 << 20) }
        #expect(throws: Inflate.Failure.corrupt) { try Inflate.inflate(Self.raw, format: .gzip, limit: 1 << 20) }
    }

    @Test func outputPastTheLimitIsTooLarge() throws {
        #expect(throws: Inflate.Failure.tooLarge) { _ = try Inflate.inflate(Self.zeros, format: .raw, limit: 99_999) }
        #expect(try Inflate.inflate(Self.zeros, format: .raw, limit: 100_000).count == 100_000)
    }

    static func hex(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            out.append(UInt8(text[index..<next], radix: 16)!)
            index = next
        }
        return out
    }
}
