import ATSPolicy
import Foundation
import PolicyLoader
import Testing

/// The tree keeps the file's own value types: ATS treats `<string>YES</string>` and `<integer>1</integer>` as
/// "not a boolean", so the loader must never coerce them.
@Suite struct PolicyLoaderTypeTests {
    static let typeCases: [(xml: String, expected: PlistValue)] = [
        ("<true/>", .bool(true)),
        ("<false/>", .bool(false)),
        ("<string>YES</string>", .string("YES")),
        ("<string>true</string>", .string("true")),
        ("<integer>1</integer>", .integer(1)),
        ("<integer>0</integer>", .integer(0)),
        ("<integer>-7</integer>", .integer(-7)),
        ("<real>1.0</real>", .real(1.0)),
        ("<real>0.5</real>", .real(0.5)),
        ("<date>2020-01-01T00:00:00Z</date>", .date(599_529_600)),
        ("<data>AAEC</data>", .data([0, 1, 2])),
        ("<string>AAEC</string>", .string("AAEC")),
        ("<array><integer>1</integer><true/></array>", .array([.integer(1), .bool(true)])),
        ("<dict/>", .dictionary(PlistDictionary())),
        ("<array/>", .array([])),
    ]

    @Test(arguments: typeCases)
    func keepsFileType(xml: String, expected: PlistValue) throws {
        let dir = try TempDir()
        defer { dir.remove() }
        for (format, bytes) in try Fixture.both("<dict><key>NSAllowsArbitraryLoads</key>\(xml)</dict>") {
            let path = try dir.write("t.\(format).plist", bytes)
            let loaded = try PolicyLoader.load(path: path)
            #expect(loaded.format == format)
            #expect(loaded.atsDictionary?.dictionaryValue?["NSAllowsArbitraryLoads"] == expected, "\(format)")
        }
    }

    @Test func xmlAndBinaryGiveIdenticalTreesWithSortedKeys() throws {
        let body = """
            <dict>
              <key>NSExceptionDomains</key>
              <dict>
                <key>zeta.example.com</key><dict><key>NSIncludesSubdomains</key><string>YES</string></dict>
                <key>alpha.example.com</key>
                <dict>
                  <key>NSExceptionMinimumTLSVersion</key><string>TLSv1.0</string>
                  <key>NSExceptionAllowsInsecureHTTPLoads</key><integer>1</integer>
                </dict>
              </dict>
              <key>NSAllowsArbitraryLoads</key><true/>
            </dict>
            """
        let dir = try TempDir()
        defer { dir.remove() }
        let trees = try Fixture.both(body).map { format, bytes in
            try PolicyLoader.load(path: try dir.write("t.\(format).plist", bytes)).atsDictionary
        }
        #expect(trees.count == 2)
        #expect(trees[0] == trees[1])
        let root = try #require(trees[0]?.dictionaryValue)
        #expect(root.keys == ["NSAllowsArbitraryLoads", "NSExceptionDomains"])
        let domains = try #require(root["NSExceptionDomains"]?.dictionaryValue)
        #expect(domains.keys == ["alpha.example.com", "zeta.example.com"])
        #expect(
            domains["alpha.example.com"]?.dictionaryValue?.keys
                == ["NSExceptionAllowsInsecureHTTPLoads", "NSExceptionMinimumTLSVersion"])
        #expect(domains["alpha.example.com"]?.dictionaryValue?["NSExceptionAllowsInsecureHTTPLoads"] == .integer(1))
    }

    /// A binary plist from an independent encoder (Python's plistlib) loads to the same tree as the XML it came
    /// from, so the binary path is not only checked against Foundation's own output.
    @Test func pythonBinaryPlistMatchesXML() throws {
        let dir = try TempDir()
        defer { dir.remove() }
        let xml = Fixture.xml(
            """
            <dict><key>NSAllowsArbitraryLoads</key><integer>1</integer>
            <key>NSExceptionDomains</key><dict><key>a.example.com</key><dict>
            <key>NSIncludesSubdomains</key><true/><key>NSExceptionMinimumTLSVersion</key><string>TLSv1.1</string>
            <key>big</key><integer>4294967296</integer><key>neg</key><integer>-1</integer>
            <key>r</key><real>2.5</real><key>d</key><data>AAECAw==</data></dict></dict></dict>
            """)
        let xmlPath = try dir.write("in.plist", xml)
        let binPath = dir.path("out.bplist")
        try Fixture.python(
            """
            import plistlib, sys
            with open(sys.argv[1], 'rb') as f: v = plistlib.load(f)
            with open(sys.argv[2], 'wb') as f: plistlib.dump(v, f, fmt=plistlib.FMT_BINARY)
            """, [xmlPath, binPath])
        let fromXML = try PolicyLoader.load(path: xmlPath)
        let fromBinary = try PolicyLoader.load(path: binPath)
        #expect(fromBinary.format == .binary)
        #expect(fromBinary.atsDictionary == fromXML.atsDictionary)
        let entry = fromBinary.atsDictionary?.dictionaryValue?["NSExceptionDomains"]?.dictionaryValue?["a.example.com"]
        #expect(entry?.dictionaryValue?["big"] == .integer(4_294_967_296))
        #expect(entry?.dictionaryValue?["neg"] == .integer(-1))
        #expect(fromBinary.atsDictionary?.dictionaryValue?["NSAllowsArbitraryLoads"] == .integer(1))
    }
}
