// Theory of operation: a QR code (ISO/IEC 18004) for a short text, in byte mode, versions 1 to 10, error correction
// L or M. No QR library for Swift on Linux is among the packages this project may use, and a URL needs only this
// small part of the standard:
//
// 1. The smallest version whose data capacity holds the bytes is chosen (QRCodeTables).
// 2. Data bits: mode 0100, the byte count, the bytes, a terminator, padding to whole codewords (0xEC, 0x11).
// 3. The codewords are split into blocks, each block gets Reed-Solomon error correction (QRReedSolomon), and
//    the blocks are interleaved.
// 4. The matrix gets its function patterns (finders, timing, alignment, the dark module, reserved format and
//    version areas), then the codeword bits in the standard zig-zag, then each of the eight masks is tried and
//    the one with the lowest penalty kept, with its format (and, from version 7, version) information.
//
// A test decodes what this draws with a real decoder (zbarimg).

/// A QR code's modules: `size` × `size`, true for dark.
public struct QRCode: Sendable, Equatable {
    public enum ErrorCorrection: Sendable, CaseIterable {
        /// About 7% of codewords recoverable.
        case low
        /// About 15%.
        case medium

        /// The two bits the format information carries for the level.
        var formatBits: Int {
            switch self {
            case .low: 1
            case .medium: 0
            }
        }
    }

    public enum EncodingError: Error, Equatable, CustomStringConvertible {
        /// More bytes than version 10 holds at that level.
        case tooLong(bytes: Int, capacity: Int)

        public var description: String {
            switch self {
            case .tooLong(let bytes, let capacity):
                "\(bytes) bytes do not fit a QR code of version 10 or lower (at most \(capacity) at this level)"
            }
        }
    }

    public let version: Int
    public let errorCorrection: ErrorCorrection
    /// The mask pattern chosen (0–7).
    public let mask: Int
    public let size: Int
    /// Row-major, `size * size` entries.
    public let modules: [Bool]

    public func isDark(row: Int, column: Int) -> Bool { modules[row * size + column] }

    /// Encodes `text` as UTF-8 bytes, in the smallest version that holds them.
    public init(text: String, errorCorrection: ErrorCorrection = .medium) throws(EncodingError) {
        try self.init(bytes: Array(text.utf8), errorCorrection: errorCorrection)
    }

    public init(bytes: [UInt8], errorCorrection: ErrorCorrection = .medium) throws(EncodingError) {
        guard let version = (1...QRCodeTables.maxVersion).first(where: {
            bytes.count <= QRCodeTables.byteCapacity(version: $0, level: errorCorrection)
        }) else {
            throw .tooLong(
                bytes: bytes.count,
                capacity: QRCodeTables.byteCapacity(version: QRCodeTables.maxVersion, level: errorCorrection))
        }
        let blocks = QRCodeTables.blocks(version: version, level: errorCorrection)
        let data = Self.dataCodewords(bytes, version: version, capacity: blocks.dataCodewords)
        let codewords = Self.interleave(data, blocks: blocks)
        var matrix = QRMatrix(version: version)
        matrix.drawFunctionPatterns()
        matrix.drawCodewords(codewords)
        func masked(_ mask: Int) -> (mask: Int, penalty: Int, matrix: QRMatrix) {
            var candidate = matrix
            candidate.applyMask(mask)
            candidate.drawFormatBits(level: errorCorrection, mask: mask)
            return (mask, candidate.penalty(), candidate)
        }
        var chosen = masked(0)
        for mask in 1..<8 {
            let candidate = masked(mask)
            if candidate.penalty < chosen.penalty { chosen = candidate }
        }
        self.version = version
        self.errorCorrection = errorCorrection
        self.mask = chosen.mask
        self.size = chosen.matrix.size
        self.modules = chosen.matrix.modules
    }

    /// Mode, count, bytes, terminator and padding: exactly `capacity` codewords.
    static func dataCodewords(_ bytes: [UInt8], version: Int, capacity: Int) -> [UInt8] {
        var bits = BitBuffer()
        bits.append(0b0100, count: 4)  // byte mode
        bits.append(bytes.count, count: version <= 9 ? 8 : 16)
        for b in bytes { bits.append(Int(b), count: 8) }
        let capacityBits = capacity * 8
        bits.append(0, count: min(4, capacityBits - bits.count))
        bits.append(0, count: (8 - bits.count % 8) % 8)
        var out = bits.bytes
        var pad: UInt8 = 0xEC
        while out.count < capacity {
            out.append(pad)
            pad = pad == 0xEC ? 0x11 : 0xEC
        }
        return out
    }

    /// Splits the data into the version's blocks, adds each block's error correction, and interleaves: the i-th
    /// data codeword of every block in turn, then the i-th error-correction codeword of every block.
    static func interleave(_ data: [UInt8], blocks: QRCodeTables.Blocks) -> [UInt8] {
        var dataBlocks: [[UInt8]] = []
        var offset = 0
        for length in blocks.dataLengths {
            dataBlocks.append(Array(data[offset..<offset + length]))
            offset += length
        }
        let divisor = QRReedSolomon.divisor(degree: blocks.ecPerBlock)
        let ecBlocks = dataBlocks.map { QRReedSolomon.remainder($0, divisor: divisor) }
        var out: [UInt8] = []
        out.reserveCapacity(data.count + ecBlocks.count * blocks.ecPerBlock)
        for i in 0..<(blocks.dataLengths.max() ?? 0) {
            for block in dataBlocks where i < block.count { out.append(block[i]) }
        }
        for i in 0..<blocks.ecPerBlock {
            for block in ecBlocks { out.append(block[i]) }
        }
        return out
    }
}

/// Bits appended most significant first.
struct BitBuffer {
    private(set) var bytes: [UInt8] = []
    private(set) var count = 0

    mutating func append(_ value: Int, count n: Int) {
        for i in stride(from: n - 1, through: 0, by: -1) {
            if count % 8 == 0 { bytes.append(0) }
            if (value >> i) & 1 == 1 { bytes[bytes.count - 1] |= UInt8(0x80 >> (count % 8)) }
            count += 1
        }
    }
}
