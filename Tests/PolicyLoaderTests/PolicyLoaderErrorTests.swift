import ATSPolicy
import Foundation
import Testing

@testable import PolicyLoader

/// Hostile and broken input: every case ends in a `PolicyLoadError` naming the file and the problem, never a
/// crash, and in bounded time and memory.
@Suite struct PolicyLoaderErrorTests {
    func loadError(_ bytes: [UInt8], name: String = "p.plist") throws -> PolicyLoadError? {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = try dir.write(name, bytes)
        return #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: path) }
    }

    @Test func missingFile() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.path("nope.plist")
        let error = #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: path) }
        #expect(error?.description == "\(path): file not found")
    }

    @Test(arguments: [
        "hello world", "{ NSAllowsArbitraryLoads = YES; }", "\u{0}\u{1}\u{2}",
    ])
    func notAPropertyList(_ text: String) throws {
        let error = try loadError(Array(text.utf8))
        #expect(error?.kind == .notAPropertyList)
        #expect(error?.description.contains("p.plist: not a property list") == true)
    }

    /// An empty file is reported as empty, not as one that "starts with neither '<' nor 'bplist0'".
    @Test(arguments: ["", " \n\t\r\n"])
    func emptyFile(_ text: String) throws {
        let error = try loadError(Array(text.utf8))
        #expect(error?.kind == .emptyFile)
        #expect(error?.description.hasSuffix("p.plist: the file is empty: there is no property list in it") == true)
    }

    @Test func malformedXMLNamesTheLine() throws {
        let error = try loadError(Fixture.xml("<dict>\n<key>NSAllowsArbitraryLoads</key>\n<string>x</dict>"))
        guard case .malformed(let line, _)? = error?.kind else {
            Issue.record("expected malformed, got \(String(describing: error))")
            return
        }
        #expect(line != nil)
        #expect(error?.description.contains("p.plist: malformed property list at line") == true)
    }

    /// Foundation's XML plist parser rejects internal DTD subsets, so entity-expansion bombs never expand.
    @Test func xmlEntityBombIsRefused() throws {
        let bomb = """
            <?xml version="1.0"?>
            <!DOCTYPE plist [
            <!ENTITY a "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa">
            <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
            <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
            ]>
            <plist version="1.0"><dict><key>k</key><string>&c;&c;&c;&c;</string></dict></plist>
            """
        let error = try loadError(Array(bomb.utf8))
        guard case .malformed(let line, _)? = error?.kind else {
            Issue.record("expected malformed, got \(String(describing: error))")
            return
        }
        #expect(line == 2)
    }

    /// UTF-16 XML is refused up front: the depth pre-scan reads bytes as UTF-8/ASCII.
    @Test func utf16XMLIsRefused() throws {
        var bytes: [UInt8] = [0xFF, 0xFE]
        for unit in "<plist><dict/></plist>".utf16 { bytes += [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        #expect(try loadError(bytes)?.kind == .notAPropertyList)
    }

    @Test func rootNotADictionary() throws {
        for (format, bytes) in try Fixture.both("<array><true/></array>") {
            let error = try loadError(bytes)
            #expect(error?.kind == .rootNotDictionary(actualType: "Array"), "\(format)")
            #expect(error?.description.contains("the root is an Array, not a Dictionary") == true, "\(format)")
        }
    }

    @Test(arguments: [
        ("<string>YES</string>", "String", "a"), ("<true/>", "Boolean", "a"), ("<array/>", "Array", "an"),
        ("<integer>1</integer>", "Integer", "an"),
    ])
    func atsValueOfTheWrongType(xml: String, type: String, article: String) throws {
        for (format, bytes) in try Fixture.both("<dict><key>NSAppTransportSecurity</key>\(xml)</dict>") {
            let error = try loadError(bytes, name: "Info.plist")
            #expect(error?.kind == .atsNotDictionary(actualType: type), "\(format)")
            #expect(error?.keyPath == ["NSAppTransportSecurity"])
            #expect(
                error?.description.hasSuffix(
                    "Info.plist › NSAppTransportSecurity: is \(article) \(type), not a Dictionary; ATS cannot read "
                        + "it (make NSAppTransportSecurity a <dict>)") == true)
        }
    }

    /// Every truncation of a real policy, in both encodings, gives an error (never a crash or a wrong tree).
    @Test func everyTruncationIsAnError() throws {
        let body = """
            <dict><key>NSAllowsArbitraryLoads</key><true/><key>NSExceptionDomains</key><dict>
            <key>example.com</key><dict><key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string></dict>
            </dict></dict>
            """
        let dir = try TempDir()
        defer { dir.remove() }
        for (format, bytes) in try Fixture.both(body) {
            let full = try PolicyLoader.load(path: try dir.write("full.plist", bytes))
            // The XML's closing tags are followed by a newline; cut before the final `</plist>`.
            let cuts = format == .binary ? Array(0..<bytes.count) : Array(0..<(bytes.count - 10))
            for cut in cuts {
                let path = try dir.write("cut.plist", Array(bytes.prefix(cut)))
                do {
                    let partial = try PolicyLoader.load(path: path)
                    Issue.record("\(format) cut at \(cut) loaded: \(String(describing: partial.atsDictionary))")
                } catch {
                    #expect(error.file == path)
                }
            }
            #expect(full.atsDictionary != nil)
        }
    }

    /// Deterministic byte flips in a binary plist: each gives an error or a tree, never a crash.
    @Test func corruptedBinaryNeverCrashes() throws {
        let body = """
            <dict><key>NSExceptionDomains</key><dict><key>a.example.com</key><dict>
            <key>NSIncludesSubdomains</key><true/><key>NSExceptionMinimumTLSVersion</key><string>TLSv1.1</string>
            </dict></dict><key>NSPinnedDomains</key><dict><key>b.example.com</key><dict>
            <key>NSPinnedLeafIdentities</key><array><dict><key>SPKI-SHA256-BASE64</key><string>abc=</string></dict>
            </array></dict></dict></dict>
            """
        let bytes = try Fixture.binary(fromXML: Fixture.xml(body))
        let dir = try TempDir()
        defer { dir.remove() }
        var outcomes = (loaded: 0, refused: 0)
        for position in 8..<bytes.count {
            for value: UInt8 in [0x00, 0xFF, 0x0F, 0xAF, 0xDF, 0x5F, 0x13] {
                var corrupt = bytes
                corrupt[position] = value
                let path = try dir.write("c.plist", corrupt)
                do {
                    _ = try PolicyLoader.load(path: path)
                    outcomes.loaded += 1
                } catch {
                    outcomes.refused += 1
                }
            }
        }
        #expect(outcomes.refused > 0)
    }

    /// A file above the cap is refused from its size alone (the sparse 50 MB file is never read).
    @Test func fiftyMegabyteFileIsRefused() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let path = dir.path("huge.plist")
        #expect(FileManager.default.createFile(atPath: path, contents: Data(Fixture.xml("<dict/>"))))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.truncate(atOffset: 50_000_000)
        try handle.close()
        let error = #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: path) }
        #expect(error?.kind == .tooLarge(size: 50_000_000, limit: 8 * 1_048_576))
        #expect(error?.description.contains("50000000 bytes is larger than the 8388608-byte (8 MiB) limit") == true)
    }

    static func nestedXML(depth: Int) -> [UInt8] {
        Fixture.xml(
            "<dict><key>k</key>" + String(repeating: "<array>", count: depth - 1)
                + String(repeating: "</array>", count: depth - 1) + "</dict>")
    }

    /// `depth` containers: a dictionary holding a chain of arrays, each the only element of its parent.
    static func nestedBinary(depth: Int) -> [UInt8] {
        // Objects: 0 = root dict {k: 2}, 1 = "k", 2… = arrays, the last one empty.
        let count = depth + 1
        var objects: [[UInt8]] = [[0xD1] + Fixture.refs([1, 2], objectCount: count), [0x51, UInt8(ascii: "k")]]
        for i in 0..<(depth - 1) {
            let isLast = i == depth - 2
            objects.append(isLast ? [0xA0] : [0xA1] + Fixture.refs([i + 3], objectCount: count))
        }
        return Fixture.rawBinary(objects: objects)
    }

    @Test(arguments: [LoadedPolicy.Format.xml, .binary])
    func nestingAtTheLimitLoads(format: LoadedPolicy.Format) throws {
        let bytes = format == .xml ? Self.nestedXML(depth: 512) : Self.nestedBinary(depth: 512)
        let dir = try TempDir()
        defer { dir.remove() }
        let loaded = try PolicyLoader.load(path: try dir.write("deep.plist", bytes))
        var depth = 0
        var node = loaded.atsDictionary
        while let n = node {
            depth += 1
            node = n.dictionaryValue?["k"] ?? n.arrayValue?.first
        }
        #expect(depth == 512)
    }

    @Test(arguments: [LoadedPolicy.Format.xml, .binary], [513, 100_000])
    func deepNestingIsRefused(format: LoadedPolicy.Format, depth: Int) throws {
        let bytes = format == .xml ? Self.nestedXML(depth: depth) : Self.nestedBinary(depth: depth)
        let error = try loadError(bytes)
        guard case .nestingTooDeep(let limit, _)? = error?.kind else {
            Issue.record("expected nestingTooDeep, got \(String(describing: error))")
            return
        }
        #expect(limit == 512)
    }

    @Test func cyclicBinaryReferenceIsRefused() throws {
        // Root dict {k: array}, the array containing itself.
        let bytes = Fixture.rawBinary(objects: [[0xD1, 1, 2], [0x51, UInt8(ascii: "k")], [0xA1, 2]])
        #expect(try loadError(bytes)?.kind == .cyclicReference)
    }

    @Test func outOfRangeBinaryReferenceIsRefused() throws {
        let bytes = Fixture.rawBinary(objects: [[0xD1, 1, 9], [0x51, UInt8(ascii: "k")]])
        let error = try loadError(bytes)
        guard case .corruptBinary(let detail)? = error?.kind else {
            Issue.record("expected corruptBinary, got \(String(describing: error))")
            return
        }
        #expect(detail.contains("reference 9 is out of range"))
    }

    /// 100 arrays each holding the next one twice: 2^100 values once unfolded, from a 400-byte file.
    @Test func sharedReferenceBombIsRefused() throws {
        let levels = 100
        var objects: [[UInt8]] = [[0xD1, 1, 2], [0x51, UInt8(ascii: "k")]]
        for i in 0..<levels {
            objects.append(i == levels - 1 ? [0x09] : [0xA2, UInt8(i + 3), UInt8(i + 3)])
        }
        let error = try loadError(Fixture.rawBinary(objects: objects))
        #expect(error?.kind == .tooManyValues(limit: 1_000_000))
    }

    @Test func binaryTrailerLiesAreRefused() throws {
        var bytes = Fixture.rawBinary(objects: [[0xD0]])
        bytes[bytes.count - 9] = 0xFF  // offset table offset beyond the file
        let error = try loadError(bytes)
        guard case .corruptBinary? = error?.kind else {
            Issue.record("expected corruptBinary, got \(String(describing: error))")
            return
        }
    }

    /// Found by the plist fuzz harness: a binary plist holding a set (marker 0xC_, or 0xB_ for an ordered set)
    /// crashed the process inside Foundation (`atsproxy lint` died of SIGSEGV); it is refused as corrupt instead.
    @Test(arguments: [UInt8(0xC1), 0xB1])
    func binarySetIsRefusedBeforeFoundationSeesIt(marker: UInt8) throws {
        // Root dict {k: set("a")}.
        let bytes = Fixture.rawBinary(objects: [
            [0xD1, 1, 2], [0x51, UInt8(ascii: "k")], [marker, 3], [0x51, UInt8(ascii: "a")],
        ])
        let error = try loadError(bytes)
        guard case .corruptBinary(let detail)? = error?.kind else {
            Issue.record("expected corruptBinary, got \(String(describing: error))")
            return
        }
        #expect(detail.contains("object 2 is a set"))
    }

    @Test func nonStringDictionaryKeyIsRefused() throws {
        // Binary dictionaries may have integer keys; plist dictionaries for ATS may not.
        let bytes = Fixture.rawBinary(objects: [[0xD1, 1, 2], [0x10, 0x05], [0x09]])
        let error = try loadError(bytes)
        #expect(error?.kind == .nonStringKey)
        #expect(error?.description.hasSuffix("p.plist: a dictionary key is not a string") == true)
    }

    @Test func lineNumberIsReadFromFoundationMessages() {
        #expect(PolicyLoader.lineNumber(in: "Close tag on line 2 does not match open tag string") == 2)
        #expect(PolicyLoader.lineNumber(in: "Malformed data byte group at line 14; invalid hex") == 14)
        #expect(PolicyLoader.lineNumber(in: "Unexpected end of file") == nil)
    }
}
