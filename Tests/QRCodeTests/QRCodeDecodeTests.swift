import Foundation
import TestSupport
import Testing

@testable import QRCode

/// The encoder's output read back by a real decoder, zbarimg (Debian's zbar-tools, installed by scripts/deps).
@Suite("QR codes decode with zbarimg")
struct QRCodeDecodeTests {
    /// Texts whose lengths reach every version from 1 to 10 at both levels (the largest fill version 10).
    static let texts: [String] = [
        "a", "http://atsproxy.invalid/", "http://192.168.1.20:8080/", "http://[fe80::1c2a:3bff:fe4d:5e6f]:8080/",
        String(repeating: "0123456789", count: 6), String(repeating: "https://a.test/", count: 6),
        String(repeating: "é", count: 60), String(repeating: "x", count: 150), String(repeating: "y", count: 213),
    ]

    @Test("Each text decodes to itself, at levels L and M, versions 1 to 10", arguments: texts)
    func decodes(text: String) throws {
        for level in QRCode.ErrorCorrection.allCases {
            let code = try QRCode(text: text, errorCorrection: level)
            #expect(code.size == 17 + 4 * code.version)
            #expect(try Self.decode(pgm: code.pgm()) == text, "level \(level), version \(code.version)")
        }
    }

    @Test("The versions chosen span 1 to 10")
    func versionsSpanned() throws {
        let versions = Set(try Self.texts.flatMap { t in
            try QRCode.ErrorCorrection.allCases.map { try QRCode(text: t, errorCorrection: $0).version }
        })
        #expect(versions.min() == 1)
        #expect(versions.max() == 10)
        #expect(versions.count >= 8)
    }

    @Test("The terminal rendering (half blocks) draws the same modules: read back, it decodes")
    func terminalRendering() throws {
        let text = "http://192.168.1.20:8080/"
        let code = try QRCode(text: text)
        let rendered = code.terminalText(quietZone: 2, ansiColors: false)
        // Each character is two modules, upper and lower.
        let lines = rendered.split(separator: "\n").map(Array.init)
        let extent = code.size + 4
        #expect(lines.count == (extent + 1) / 2)
        #expect(lines.allSatisfy { $0.count == extent })
        var modules = [Bool](repeating: false, count: code.size * code.size)
        for (l, line) in lines.enumerated() {
            for (c, ch) in line.enumerated() {
                let (upper, lower): (Bool, Bool) =
                    switch ch {
                    case "█": (true, true)
                    case "▀": (true, false)
                    case "▄": (false, true)
                    default: (false, false)
                    }
                for (r, dark) in [(2 * l, upper), (2 * l + 1, lower)] {
                    let row = r - 2
                    let column = c - 2
                    if (0..<code.size).contains(row), (0..<code.size).contains(column) {
                        modules[row * code.size + column] = dark
                    } else {
                        #expect(!dark, "the quiet zone is light")
                    }
                }
            }
        }
        #expect(modules == code.modules)
        #expect(try Self.decode(pgm: code.pgm()) == text)
    }

    @Test("ANSI colours draw black on white and reset at each line's end")
    func ansiColours() throws {
        let lines = try QRCode(text: "x").terminalText(ansiColors: true).split(separator: "\n")
        #expect(lines.allSatisfy { $0.hasPrefix("\u{1B}[30;107m") && $0.hasSuffix("\u{1B}[0m") })
    }

    @Test("Too long for version 10: a clear error with the capacity")
    func tooLong() {
        #expect(throws: QRCode.EncodingError.tooLong(bytes: 300, capacity: 213)) {
            try QRCode(bytes: Array(repeating: 0x41, count: 300), errorCorrection: .medium)
        }
    }

    @Test("Reed-Solomon: the error-correction codewords of the standard's worked example (version 1-M, '01234567')")
    func reedSolomonExample() {
        // ISO/IEC 18004 annex I: the data codewords of "01234567" in numeric mode, version 1-M.
        let data: [UInt8] = [
            0x10, 0x20, 0x0C, 0x56, 0x61, 0x80, 0xEC, 0x11, 0xEC, 0x11, 0xEC, 0x11, 0xEC, 0x11, 0xEC, 0x11,
        ]
        let ec = QRReedSolomon.remainder(data, divisor: QRReedSolomon.divisor(degree: 10))
        #expect(ec == [0xA5, 0x24, 0xD4, 0xC1, 0xED, 0x36, 0xC7, 0x87, 0x2C, 0x55])
    }

    /// The text zbarimg reads from the image.
    static func decode(pgm: [UInt8]) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("qrcode-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer {
            do { try FileManager.default.removeItem(at: dir) } catch { Issue.record("cannot remove \(dir.path): \(error)") }
        }
        let image = dir.appendingPathComponent("code.pgm")
        try Data(pgm).write(to: image)
        let run = try runCommand("zbarimg", ["--raw", "-q", "-Sbinary", image.path])
        #expect(run.status == 0, "zbarimg found no code")
        // -Sbinary: the decoded bytes as they are, with no newline added.
        return run.stdoutText
    }
}
