import Foundation
import TestSupport
import Testing

#if canImport(FoundationXML)
    import FoundationXML
#endif

@testable import QRCode

/// The SVG rendering: well-formed XML, sized by the version, drawing exactly the code's modules (read back from
/// the path and decoded by zbarimg).
@Suite("QR code SVG rendering")
struct QRCodeSVGTests {
    /// What an SVG holds once parsed: its attributes and the dark modules its path draws.
    struct Parsed {
        var viewBox: [Int] = []
        var width = ""
        var dark: Set<[Int]> = []
        var elements: [String] = []
    }

    /// Parses `svg` with Foundation's XMLParser (a real XML parser: malformed markup fails) and fills the modules
    /// the path's `M x y h n v1 h-n z` runs cover.
    static func parse(_ svg: String) throws -> Parsed {
        final class Delegate: NSObject, XMLParserDelegate {
            var parsed = Parsed()
            var pathData: [String] = []
            func parser(
                _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]
            ) {
                parsed.elements.append(name)
                if name == "svg" {
                    parsed.viewBox = (attributes["viewBox"] ?? "").split(separator: " ").compactMap { Int($0) }
                    parsed.width = attributes["width"] ?? ""
                }
                if name == "path", let d = attributes["d"] { pathData.append(d) }
            }
        }
        let delegate = Delegate()
        let parser = XMLParser(data: Data(svg.utf8))
        parser.delegate = delegate
        try #require(parser.parse(), "not well-formed XML: \(String(describing: parser.parserError))")
        var parsed = delegate.parsed
        for d in delegate.pathData {
            for run in d.split(separator: "z") {
                // "M12 4h3v1h-3"
                let numbers = run.dropFirst().split(whereSeparator: { "hv ".contains($0) }).compactMap { Int($0) }
                try #require(
                    numbers.count == 5 && numbers[2] > 0 && numbers[3] == 1 && numbers[4] == -numbers[2],
                    "unexpected run \(run)")
                let (x, y, n) = (numbers[0], numbers[1], numbers[2])
                for c in x..<(x + n) { parsed.dark.insert([y, c]) }
            }
        }
        return parsed
    }

    @Test(
        "Well-formed XML; the viewBox is the version's size plus the quiet zone; the path draws exactly the modules",
        arguments: QRCodeDecodeTests.texts)
    func drawsTheModules(text: String) throws {
        let code = try QRCode(text: text, errorCorrection: .low)
        let svg = code.svg(quietZone: 4, pixelSize: 300)
        let parsed = try Self.parse(svg)
        #expect(parsed.elements == ["svg", "rect", "path"])
        // Version v is 17 + 4v modules a side.
        let extent = 17 + 4 * code.version + 8
        #expect(parsed.viewBox == [0, 0, extent, extent])
        #expect(parsed.width == "300")
        var expected: Set<[Int]> = []
        for r in 0..<code.size {
            for c in 0..<code.size where code.isDark(row: r, column: c) { expected.insert([r + 4, c + 4]) }
        }
        #expect(parsed.dark == expected)
    }

    @Test("The modules read back from the SVG decode with zbarimg to the text")
    func decodes() throws {
        let text = "[Interface]\nPrivateKey = " + String(repeating: "A", count: 43) + "=\nAddress = 198.19.0.3/32\n"
        let code = try QRCode(text: text, errorCorrection: .low)
        let parsed = try Self.parse(code.svg())
        let scale = 4
        let extent = parsed.viewBox[2] * scale
        var pixels = [UInt8](repeating: 255, count: extent * extent)
        for module in parsed.dark {
            for y in 0..<scale {
                for x in 0..<scale { pixels[(module[0] * scale + y) * extent + module[1] * scale + x] = 0 }
            }
        }
        let pgm = Array("P5\n\(extent) \(extent)\n255\n".utf8) + pixels
        #expect(try QRCodeDecodeTests.decode(pgm: pgm) == text)
    }
}
