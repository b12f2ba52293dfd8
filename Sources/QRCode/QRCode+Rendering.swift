extension QRCode {
    /// The code for a terminal, two module rows per text line with Unicode half blocks (▀ ▄ █), inside a light
    /// quiet zone of `quietZone` modules. With `ansiColors`, every line is drawn black on white, so that the code
    /// reads right on a dark terminal too (a phone's camera wants dark modules on light); without, dark modules are
    /// the block characters and light ones spaces.
    public func terminalText(quietZone: Int = 2, ansiColors: Bool) -> String {
        let extent = size + 2 * quietZone
        func dark(_ r: Int, _ c: Int) -> Bool {
            let row = r - quietZone
            let column = c - quietZone
            guard (0..<size).contains(row), (0..<size).contains(column) else { return false }
            return isDark(row: row, column: column)
        }
        var out = ""
        for r in stride(from: 0, to: extent, by: 2) {
            if ansiColors { out += "\u{1B}[30;107m" }
            for c in 0..<extent {
                switch (dark(r, c), r + 1 < extent && dark(r + 1, c)) {
                case (true, true): out += "█"
                case (true, false): out += "▀"
                case (false, true): out += "▄"
                case (false, false): out += " "
                }
            }
            if ansiColors { out += "\u{1B}[0m" }
            out += "\n"
        }
        return out
    }

    /// A binary PGM image (P5), `scale` pixels per module, with a quiet zone of `quietZone` modules: what an
    /// image decoder reads, for tests.
    public func pgm(scale: Int = 4, quietZone: Int = 4) -> [UInt8] {
        let extent = (size + 2 * quietZone) * scale
        var pixels = [UInt8](repeating: 255, count: extent * extent)
        for r in 0..<size {
            for c in 0..<size where isDark(row: r, column: c) {
                for y in 0..<scale {
                    let start = ((r + quietZone) * scale + y) * extent + (c + quietZone) * scale
                    for x in 0..<scale { pixels[start + x] = 0 }
                }
            }
        }
        return Array("P5\n\(extent) \(extent)\n255\n".utf8) + pixels
    }
}

extension QRCode {
    /// The code as a standalone SVG image, for a web page (inline or as a file): one module per user unit inside a
    /// light quiet zone of `quietZone` modules (the standard asks for 4), drawn `pixelSize` CSS pixels wide. The dark
    /// modules are one path of horizontal runs, with crisp edges so a browser does not blur module borders; the
    /// light background is a rectangle, so the code reads right on a dark page too.
    public func svg(quietZone: Int = 4, pixelSize: Int = 256) -> String {
        let extent = size + 2 * quietZone
        var path = ""
        for row in 0..<size {
            var column = 0
            while column < size {
                guard isDark(row: row, column: column) else {
                    column += 1
                    continue
                }
                let start = column
                while column < size, isDark(row: row, column: column) { column += 1 }
                path += "M\(start + quietZone) \(row + quietZone)h\(column - start)v1h-\(column - start)z"
            }
        }
        return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(pixelSize)\" height=\"\(pixelSize)\" "
            + "viewBox=\"0 0 \(extent) \(extent)\" shape-rendering=\"crispEdges\" role=\"img\">"
            + "<rect width=\"\(extent)\" height=\"\(extent)\" fill=\"#fff\"/>"
            + "<path fill=\"#000\" d=\"\(path)\"/></svg>"
    }
}
