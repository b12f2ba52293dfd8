import ATSPolicy
import Foundation
import PolicyLoader
import Testing

/// Whole Info.plist vs bare NSAppTransportSecurity dictionary, and the `.app` / `.ipa` sources.
@Suite struct PolicyLoaderShapeTests {
    static let atsBody = "<dict><key>NSAllowsArbitraryLoads</key><true/></dict>"
    static let atsValue = PlistValue.dictionary(PlistDictionary([("NSAllowsArbitraryLoads", .bool(true))]))

    struct ShapeCase: Sendable, CustomTestStringConvertible {
        let name: String
        let body: String
        let whole: Bool
        let ats: PlistValue?
        let bundleID: String?
        let misplaced: [String]
        var testDescription: String { name }
    }

    static let shapes: [ShapeCase] = [
        ShapeCase(
            name: "whole Info.plist with ATS",
            body: """
                <dict><key>CFBundleIdentifier</key><string>com.example.app</string>
                <key>NSAppTransportSecurity</key>\(atsBody)</dict>
                """,
            whole: true, ats: atsValue, bundleID: "com.example.app", misplaced: []),
        ShapeCase(
            name: "whole Info.plist without ATS",
            body: "<dict><key>CFBundleIdentifier</key><string>com.example.app</string></dict>",
            whole: true, ats: nil, bundleID: "com.example.app", misplaced: []),
        ShapeCase(
            name: "Info.plist with ATS keys at its top level",
            body: """
                <dict><key>CFBundleName</key><string>X</string>
                <key>NSAllowsArbitraryLoads</key><true/></dict>
                """,
            whole: true, ats: nil, bundleID: nil, misplaced: ["NSAllowsArbitraryLoads"]),
        ShapeCase(
            name: "NSAppTransportSecurity alone", body: "<dict><key>NSAppTransportSecurity</key>\(atsBody)</dict>",
            whole: true, ats: atsValue, bundleID: nil, misplaced: []),
        ShapeCase(
            name: "bare ATS dictionary", body: atsBody, whole: false, ats: atsValue, bundleID: nil, misplaced: []),
        ShapeCase(
            name: "empty dictionary", body: "<dict/>", whole: false, ats: .dictionary(PlistDictionary()),
            bundleID: nil, misplaced: []),
        ShapeCase(
            name: "bare dictionary with a misspelt key",
            body: "<dict><key>NSAlowsArbitraryLoads</key><true/></dict>", whole: false,
            ats: .dictionary(PlistDictionary([("NSAlowsArbitraryLoads", .bool(true))])), bundleID: nil, misplaced: []),
    ]

    @Test(arguments: shapes)
    func classifiesRoot(_ c: ShapeCase) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        for (format, bytes) in try Fixture.both(c.body) {
            let loaded = try PolicyLoader.load(path: try dir.write("Info.\(format).plist", bytes))
            #expect(loaded.isWholeInfoPlist == c.whole, "\(format)")
            #expect(loaded.atsDictionary == c.ats, "\(format)")
            #expect(loaded.bundleIdentifier == c.bundleID, "\(format)")
            #expect(loaded.misplacedATSKeys == c.misplaced, "\(format)")
            if c.whole && c.ats == nil {
                #expect(loaded.notes.contains { $0.contains("full ATS defaults apply") })
            }
        }
    }

    @Test func loadsAppBundleFolder() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let body = """
            <dict><key>CFBundleIdentifier</key><string>com.example.app</string>
            <key>NSAppTransportSecurity</key>\(Self.atsBody)</dict>
            """
        for (format, bytes) in try Fixture.both(body) {
            try dir.write("\(format)/MyApp.app/Info.plist", bytes)
            let loaded = try PolicyLoader.load(path: dir.path("\(format)/MyApp.app"))
            #expect(loaded.sourceDescription == "MyApp.app › Info.plist")
            #expect(loaded.format == format)
            #expect(loaded.atsDictionary == Self.atsValue)
            #expect(loaded.bundleIdentifier == "com.example.app")
        }
    }

    @Test func appBundleWithoutInfoPlistIsAnError() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path("Empty.app"), withIntermediateDirectories: true)
        #expect(throws: PolicyLoadError(file: dir.path("Empty.app"), kind: .bundleWithoutInfoPlist)) {
            try PolicyLoader.load(path: dir.path("Empty.app"))
        }
    }

    /// A plain folder (a mistyped path such as /tmp) is "not an .app bundle", not "a bundle without Info.plist".
    @Test func folderThatIsNotABundleIsNamedSo() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        try FileManager.default.createDirectory(atPath: dir.path("stuff"), withIntermediateDirectories: true)
        let error = #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: dir.path("stuff")) }
        #expect(error?.kind == .notABundle)
        #expect(error?.description.contains("a folder, not an .app bundle") == true)
    }

    @Test func loadsOnlyTheAppInfoPlistFromAnIPA() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let appBody = """
            <dict><key>CFBundleIdentifier</key><string>com.example.app</string>
            <key>NSAppTransportSecurity</key>\(Self.atsBody)</dict>
            """
        let pluginBody = "<dict><key>CFBundleIdentifier</key><string>com.example.app.widget</string></dict>"
        for (format, bytes) in try Fixture.both(appBody) {
            let ipa = dir.path("MyApp-\(format).ipa")
            try Fixture.zip(
                at: ipa,
                members: [
                    ("Payload/MyApp.app/PlugIns/Widget.appex/Info.plist", Fixture.xml(pluginBody)),
                    ("Payload/MyApp.app/Info.plist", bytes),
                    ("Payload/MyApp.app/MyApp", Array(repeating: 0x90, count: 4096)),
                ], in: dir)
            let loaded = try PolicyLoader.load(path: ipa)
            #expect(loaded.sourceDescription == "MyApp-\(format).ipa › Payload/MyApp.app/Info.plist")
            #expect(loaded.format == format)
            #expect(loaded.isWholeInfoPlist)
            #expect(loaded.bundleIdentifier == "com.example.app")
            #expect(loaded.atsDictionary == Self.atsValue)
        }
    }

    /// Real .ipa files are far above the plist cap; only the Info.plist member counts against it. The archive is
    /// named .zip so it is recognised by its signature, not its name.
    @Test func largeArchiveIsReadByItsInfoPlistOnly() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let archive = dir.path("Big.zip")
        var noise = Fixture.SplitMix(state: 1)
        let binary = (0..<(9 * 1_048_576)).map { _ in UInt8(truncatingIfNeeded: noise.next()) }
        try Fixture.zip(
            at: archive,
            members: [
                ("Payload/Big.app/Big", binary),
                ("Payload/Big.app/Info.plist", Fixture.xml("<dict><key>NSAppTransportSecurity</key><dict/></dict>")),
            ], in: dir)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: archive)[.size] as? NSNumber)
        #expect(size.intValue > PolicyLoader.maximumPlistBytes)
        let loaded = try PolicyLoader.load(path: archive)
        #expect(loaded.sourceDescription == "Big.zip › Payload/Big.app/Info.plist")
        #expect(loaded.atsDictionary == .dictionary(PlistDictionary()))
    }

    @Test func ipaWithoutAppInfoPlistIsAnError() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ipa = dir.path("NoApp.ipa")
        try Fixture.zip(
            at: ipa,
            members: [
                ("Payload/MyApp.app/PlugIns/Widget.appex/Info.plist", Fixture.xml("<dict/>")),
                ("Info.plist", Fixture.xml("<dict/>")),
            ], in: dir)
        let error = #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: ipa) }
        #expect(error?.kind == .ipaWithoutInfoPlist)
        #expect(error?.description == "NoApp.ipa: no Payload/*.app/Info.plist entry in this .ipa")
    }

    @Test func ipaWhoseInfoPlistInflatesPastTheCapIsRefused() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ipa = dir.path("Bomb.ipa")
        // 9 MiB of zeros deflates to a few KiB.
        try Fixture.zip(
            at: ipa, members: [("Payload/Bomb.app/Info.plist", Array(repeating: 0, count: 9 * 1_048_576))], in: dir)
        let error = #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: ipa) }
        guard case .tooLarge(_, let limit)? = error?.kind else {
            Issue.record("expected tooLarge, got \(String(describing: error))")
            return
        }
        #expect(limit == PolicyLoader.maximumPlistBytes)
        #expect(error?.file == "Bomb.ipa › Payload/Bomb.app/Info.plist")
    }

    @Test func ipaThatIsNotAZipIsAnError() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ipa = try dir.write("Broken.ipa", Array("this is not a zip file".utf8))
        let error = #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: ipa) }
        guard case .notAZipArchive? = error?.kind else {
            Issue.record("expected notAZipArchive, got \(String(describing: error))")
            return
        }
    }

    /// Found by fuzzing: a deflated Info.plist whose stream never ends (a sync flush, no final block) made the
    /// old inflate (ZIPFoundation 0.9.20 on Linux) ask for more input forever. Now a clear error, at once.
    @Test(.timeLimit(.minutes(1)))
    func ipaWhoseDeflateStreamNeverEndsIsAnError() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let ipa = try dir.write("Cut.ipa", Self.bytes(hex: Self.deflateStreamNeverEnds))
        let error = #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: ipa) }
        #expect(error?.description.hasPrefix("Cut.ipa › Payload/App.app/Info.plist: ") == true, "\(String(describing: error))")
        #expect(error?.description.contains("the deflated data ends before its stream does") == true)
    }

    @Test func ipaWithStoredAndZip64MembersLoads() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let plist = Fixture.xml("<dict><key>NSAppTransportSecurity</key><dict><key>NSAllowsArbitraryLoads</key><true/></dict></dict>")
        let source = try dir.write("Info.plist", plist)
        // A stored (not deflated) member, and a deflated one with ZIP64 sizes in its extra field.
        let writers = [
            ("Stored.ipa", "z.writestr(zipfile.ZipInfo('Payload/App.app/Info.plist'), data, zipfile.ZIP_STORED)"),
            ("Zip64.ipa", "z.open('Payload/App.app/Info.plist', 'w', force_zip64=True).write(data)"),
        ]
        for (name, write) in writers {
            let ipa = dir.path(name)
            try Fixture.python(
                """
                import sys, zipfile
                data = open(sys.argv[2], 'rb').read()
                with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
                    z.writestr('Payload/App.app/', b'')
                    \(write)
                """, [ipa, source])
            let loaded = try PolicyLoader.load(path: ipa)
            #expect(loaded.sourceDescription == "\(name) › Payload/App.app/Info.plist")
            #expect(loaded.atsDictionary != .dictionary(PlistDictionary()))
        }
    }

    @Test func ipaWithAWrongChecksumIsAnError() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let good = dir.path("Good.ipa")
        try Fixture.zip(at: good, members: [("Payload/App.app/Info.plist", Fixture.xml("<dict/>"))], in: dir)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: good)))
        // The central directory entry's CRC-32 (offset 16 in the entry) no longer matches the member's bytes.
        let central = try #require(Self.index(of: [0x50, 0x4B, 0x01, 0x02], in: bytes))
        bytes[central + 16] ^= 0xFF
        let ipa = try dir.write("Bad.ipa", bytes)
        let error = #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: ipa) }
        #expect(error?.file == "Bad.ipa › Payload/App.app/Info.plist")
        #expect(error?.description.contains("CRC-32 mismatch: the entry is corrupt") == true, "\(String(describing: error))")
    }

    @Test func ipaCutShortIsAnError() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let good = dir.path("Good.ipa")
        try Fixture.zip(at: good, members: [("Payload/App.app/Info.plist", Fixture.xml("<dict/>"))], in: dir)
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: good)))
        for cut in [10, bytes.count / 2, bytes.count - 5] {
            let ipa = try dir.write("Cut\(cut).ipa", Array(bytes[0..<cut]))
            let error = #expect(throws: PolicyLoadError.self) { try PolicyLoader.load(path: ipa) }
            guard case .notAZipArchive? = error?.kind else {
                Issue.record("cut at \(cut): expected notAZipArchive, got \(String(describing: error))")
                continue
            }
        }
    }

    static let deflateStreamNeverEnds =
        "504b030414000000080000002100c77c252e84000000910000001a0000005061796c6f61642f4170702e6170702f496e666f2e70"
        + "6c6973744a2ac8c92c2e3130b8c4c8c4cc122f20e4ece6549a979293ea99929a57929996995a142f20e617ec585010529498575c"
        + "905f54129c9a5c5a945952192fc09f9c9fab975a91985b9093aa9758507091950da23a2727bfbcd8b12829b3a428b1a8d2273f31"
        + "a598938357c9da372093010c18192134033b032ac802000000ffff00ffff0000504b01021e0314000000080000002100c77c252e"
        + "84000000910000001a0000000000000000000000a481000000005061796c6f61642f4170702e6170702f496e666f2e706c697374"
        + "504b0506000000000100010048000000bc0000000000"

    static func bytes(hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16) ?? 0)
            index = next
        }
        return out
    }

    static func index(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...(haystack.count - needle.count)).first { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }
}
