/// The standard's tables for versions 1 to 10 (ISO/IEC 18004 tables 9 and E.1): codewords per block and where
/// the alignment patterns go.
enum QRCodeTables {
    static let maxVersion = 10

    struct Blocks {
        /// Error-correction codewords per block.
        let ecPerBlock: Int
        /// Data codewords of each block, in order (short blocks first).
        let dataLengths: [Int]
        var dataCodewords: Int { dataLengths.reduce(0, +) }
    }

    /// (error-correction codewords per block, [(blocks, data codewords each)]) for L and M, by version.
    private static let low: [(Int, [(Int, Int)])] = [
        (7, [(1, 19)]), (10, [(1, 34)]), (15, [(1, 55)]), (20, [(1, 80)]), (26, [(1, 108)]),
        (18, [(2, 68)]), (20, [(2, 78)]), (24, [(2, 97)]), (30, [(2, 116)]), (18, [(2, 68), (2, 69)]),
    ]
    private static let medium: [(Int, [(Int, Int)])] = [
        (10, [(1, 16)]), (16, [(1, 28)]), (26, [(1, 44)]), (18, [(2, 32)]), (24, [(2, 43)]),
        (16, [(4, 27)]), (18, [(4, 31)]), (22, [(2, 38), (2, 39)]), (22, [(3, 36), (2, 37)]),
        (26, [(4, 43), (1, 44)]),
    ]

    static func blocks(version: Int, level: QRCode.ErrorCorrection) -> Blocks {
        let (ec, groups) = (level == .low ? low : medium)[version - 1]
        return Blocks(ecPerBlock: ec, dataLengths: groups.flatMap { Array(repeating: $0.1, count: $0.0) })
    }

    /// Bytes that fit in byte mode: the data codewords less the mode (4 bits) and count (8 or 16 bits).
    static func byteCapacity(version: Int, level: QRCode.ErrorCorrection) -> Int {
        let bits = blocks(version: version, level: level).dataCodewords * 8 - 4 - (version <= 9 ? 8 : 16)
        return bits / 8
    }

    /// Row and column coordinates of the alignment patterns' centres.
    static func alignmentPositions(version: Int) -> [Int] {
        switch version {
        case 1: []
        case 2...6: [6, 4 * version + 10]
        case 7: [6, 22, 38]
        case 8: [6, 24, 42]
        case 9: [6, 26, 46]
        default: [6, 28, 50]
        }
    }
}
