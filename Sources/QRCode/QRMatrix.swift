/// The module grid while a QR code is drawn: the modules, and which of them belong to function patterns (never
/// masked, never data).
struct QRMatrix {
    let version: Int
    let size: Int
    var modules: [Bool]
    var isFunction: [Bool]

    init(version: Int) {
        self.version = version
        size = version * 4 + 17
        modules = Array(repeating: false, count: size * size)
        isFunction = Array(repeating: false, count: size * size)
    }

    subscript(row: Int, column: Int) -> Bool {
        get { modules[row * size + column] }
        set { modules[row * size + column] = newValue }
    }

    private mutating func setFunction(row: Int, column: Int, _ dark: Bool) {
        modules[row * size + column] = dark
        isFunction[row * size + column] = true
    }

    mutating func drawFunctionPatterns() {
        // Timing patterns, drawn first: finders and alignment overwrite their ends.
        for i in 0..<size {
            setFunction(row: 6, column: i, i % 2 == 0)
            setFunction(row: i, column: 6, i % 2 == 0)
        }
        drawFinder(row: 3, column: 3)
        drawFinder(row: 3, column: size - 4)
        drawFinder(row: size - 4, column: 3)
        let positions = QRCodeTables.alignmentPositions(version: version)
        let last = positions.count - 1
        for (i, r) in positions.enumerated() {
            for (j, c) in positions.enumerated() {
                // Not on the three finders' corners.
                if (i == 0 && j == 0) || (i == 0 && j == last) || (i == last && j == 0) { continue }
                drawAlignment(row: r, column: c)
            }
        }
        // Reserve the format areas (drawn per mask) and draw the version information.
        drawFormatBits(level: .medium, mask: 0)
        drawVersion()
    }

    /// A 7×7 finder with its light separator, centred on (row, column), clipped at the edges.
    private mutating func drawFinder(row: Int, column: Int) {
        for dr in -4...4 {
            for dc in -4...4 {
                let r = row + dr
                let c = column + dc
                guard (0..<size).contains(r), (0..<size).contains(c) else { continue }
                let distance = max(abs(dr), abs(dc))
                setFunction(row: r, column: c, distance != 2 && distance != 4)
            }
        }
    }

    private mutating func drawAlignment(row: Int, column: Int) {
        for dr in -2...2 {
            for dc in -2...2 {
                setFunction(row: row + dr, column: column + dc, max(abs(dr), abs(dc)) != 1)
            }
        }
    }

    /// The 15-bit format information (level and mask, BCH-protected, XORed with 0x5412), in both copies, and the
    /// dark module.
    mutating func drawFormatBits(level: QRCode.ErrorCorrection, mask: Int) {
        let data = level.formatBits << 3 | mask
        var rem = data
        for _ in 0..<10 { rem = (rem << 1) ^ ((rem >> 9) * 0x537) }
        let bits = (data << 10 | rem) ^ 0x5412
        func bit(_ i: Int) -> Bool { (bits >> i) & 1 == 1 }
        // First copy, around the top-left finder.
        for i in 0...5 { setFunction(row: i, column: 8, bit(i)) }
        setFunction(row: 7, column: 8, bit(6))
        setFunction(row: 8, column: 8, bit(7))
        setFunction(row: 8, column: 7, bit(8))
        for i in 9..<15 { setFunction(row: 8, column: 14 - i, bit(i)) }
        // Second copy, split between the other two finders.
        for i in 0..<8 { setFunction(row: 8, column: size - 1 - i, bit(i)) }
        for i in 8..<15 { setFunction(row: size - 15 + i, column: 8, bit(i)) }
        setFunction(row: size - 8, column: 8, true)  // the dark module
    }

    /// Versions 7 and up: the version number with its 12-bit BCH code, in two 6×3 blocks.
    private mutating func drawVersion() {
        guard version >= 7 else { return }
        var rem = version
        for _ in 0..<12 { rem = (rem << 1) ^ ((rem >> 11) * 0x1F25) }
        let bits = version << 12 | rem
        for i in 0..<18 {
            let dark = (bits >> i) & 1 == 1
            let a = size - 11 + i % 3
            let b = i / 3
            setFunction(row: b, column: a, dark)
            setFunction(row: a, column: b, dark)
        }
    }

    /// The codewords' bits, most significant first, up and down two-module columns from the bottom right,
    /// skipping the vertical timing column. Modules left over (the remainder bits) stay light.
    mutating func drawCodewords(_ codewords: [UInt8]) {
        var i = 0
        let total = codewords.count * 8
        var right = size - 1
        while right >= 1 {
            if right == 6 { right = 5 }
            let upward = (right + 1) & 2 == 0
            for vertical in 0..<size {
                let row = upward ? size - 1 - vertical : vertical
                for j in 0..<2 {
                    let column = right - j
                    guard !isFunction[row * size + column], i < total else { continue }
                    self[row, column] = (codewords[i >> 3] >> UInt8(7 - (i & 7))) & 1 == 1
                    i += 1
                }
            }
            right -= 2
        }
    }

    /// XORs the data modules with mask pattern `mask` (applying it twice undoes it).
    mutating func applyMask(_ mask: Int) {
        for r in 0..<size {
            for c in 0..<size where !isFunction[r * size + c] {
                let flip: Bool
                switch mask {
                case 0: flip = (r + c) % 2 == 0
                case 1: flip = r % 2 == 0
                case 2: flip = c % 3 == 0
                case 3: flip = (r + c) % 3 == 0
                case 4: flip = (r / 2 + c / 3) % 2 == 0
                case 5: flip = (r * c) % 2 + (r * c) % 3 == 0
                case 6: flip = ((r * c) % 2 + (r * c) % 3) % 2 == 0
                default: flip = ((r + c) % 2 + (r * c) % 3) % 2 == 0
                }
                if flip { self[r, c].toggle() }
            }
        }
    }

    /// The standard's penalty score: runs of five or more, 2×2 blocks, finder-like 1:1:3:1:1 patterns with light
    /// space beside them, and the imbalance between dark and light.
    func penalty() -> Int {
        var score = 0
        let finderLike: [Bool] = [true, false, true, true, true, false, true]
        for line in 0..<size {
            for horizontal in [true, false] {
                let cells = (0..<size).map { horizontal ? self[line, $0] : self[$0, line] }
                var run = 1
                for k in 1..<size {
                    if cells[k] == cells[k - 1] {
                        run += 1
                    } else {
                        if run >= 5 { score += run - 2 }
                        run = 1
                    }
                }
                if run >= 5 { score += run - 2 }
                for k in 0...(size - 7) where Array(cells[k..<k + 7]) == finderLike {
                    let lightBefore = k >= 4 && cells[(k - 4)..<k].allSatisfy { !$0 }
                    let lightAfter = k + 11 <= size && cells[(k + 7)..<(k + 11)].allSatisfy { !$0 }
                    if lightBefore || lightAfter { score += 40 }
                }
            }
        }
        for r in 0..<(size - 1) {
            for c in 0..<(size - 1) {
                let v = self[r, c]
                if self[r, c + 1] == v, self[r + 1, c] == v, self[r + 1, c + 1] == v { score += 3 }
            }
        }
        let dark = modules.filter { $0 }.count
        let percent = dark * 100 / modules.count
        score += abs(percent - 50) / 5 * 10
        return score
    }
}
