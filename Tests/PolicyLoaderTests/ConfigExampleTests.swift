import ATSPolicy
import Foundation
import PolicyLoader
import Testing

/// The example policies in `config/` load, as XML and as binary, to the trees their README describes.
@Suite struct ConfigExampleTests {
    /// `config/` of this package, found from this file's path (Tests/PolicyLoaderTests/ → package root).
    static let configFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("config")

    static func dict(_ entries: [(String, PlistValue)]) -> PlistValue {
        .dictionary(PlistDictionary(entries.map { (key: $0.0, value: $0.1) }))
    }

    static let examples: [(file: String, tree: PlistValue)] = [
        ("apple-default.plist", dict([])),
        (
            "media-server.plist",
            dict([
                (
                    "NSExceptionDomains",
                    dict([("media-server.example.com", dict([("NSExceptionAllowsInsecureHTTPLoads", .bool(true))]))])
                )
            ])
        ),
        (
            "old-tls-server.plist",
            dict([
                (
                    "NSExceptionDomains",
                    dict([
                        (
                            "less-secure.example.com",
                            dict([
                                ("NSExceptionMinimumTLSVersion", .string("TLSv1.0")),
                                ("NSExceptionRequiresForwardSecrecy", .bool(false)),
                            ])
                        )
                    ])
                )
            ])
        ),
        (
            "browser-app.plist",
            dict([
                ("NSAllowsArbitraryLoads", .bool(true)),
                (
                    "NSExceptionDomains",
                    dict([
                        (
                            "api.example.com",
                            dict([
                                ("NSExceptionAllowsInsecureHTTPLoads", .bool(false)),
                                ("NSExceptionMinimumTLSVersion", .string("TLSv1.2")),
                                ("NSExceptionRequiresForwardSecrecy", .bool(true)),
                            ])
                        )
                    ])
                ),
            ])
        ),
        (
            "chat-app.plist",
            dict([
                ("NSAllowsArbitraryLoads", .bool(true)),
                (
                    "NSExceptionDomains",
                    dict([
                        (
                            "hosted-chat.example",
                            dict([
                                ("NSExceptionAllowsInsecureHTTPLoads", .bool(false)),
                                ("NSIncludesSubdomains", .bool(true)),
                            ])
                        ),
                        ("update.hosted-chat.example", dict([("NSExceptionRequiresForwardSecrecy", .bool(false))])),
                    ])
                ),
            ])
        ),
    ]

    @Test(arguments: examples)
    func loadsExample(file: String, tree: PlistValue) throws {
        let path = Self.configFolder.appendingPathComponent(file).path
        let loaded = try PolicyLoader.load(path: path)
        #expect(loaded.format == .xml)
        #expect(!loaded.isWholeInfoPlist)
        #expect(loaded.sourceDescription == path)
        #expect(loaded.atsDictionary == tree)

        let dir = try TempDir()
        defer { dir.remove() }
        let xml = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let binary = try PolicyLoader.load(path: try dir.write(file, try Fixture.binary(fromXML: xml)))
        #expect(binary.format == .binary)
        #expect(binary.atsDictionary == tree)
    }
}
