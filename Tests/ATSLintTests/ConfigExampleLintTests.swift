import ATSLint
import ATSPolicy
import Foundation
import PolicyLoader
import Testing

/// What `atsproxy lint` says about each example in `config/`, per profile.
@Suite struct ConfigExampleLintTests {
    static let configFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("config")

    static let expectations: [(file: String, profile: IOSProfile, rules: [String])] = [
        ("apple-default.plist", .ios26, []),
        ("media-server.plist", .ios26, ["ATS004"]),
        ("old-tls-server.plist", .ios17, ["ATS005", "ATS008"]),
        ("old-tls-server.plist", .ios26, ["ATS006", "ATS008"]),
        ("browser-app.plist", .ios26, ["ATS001"]),
        ("chat-app.plist", .ios26, ["ATS001", "ATS020", "ATS008"]),
    ]

    @Test(arguments: expectations)
    func example(file: String, profile: IOSProfile, rules: [String]) throws {
        let xml = try [UInt8](Data(contentsOf: Self.configFolder.appendingPathComponent(file)))
        for bytes in [xml, try LintFixture.binary(fromXML: xml)] {
            let loaded = try LintFixture.load(bytes)
            #expect(lint(loaded.atsDictionary, profile: profile).map(\.ruleID) == rules)
        }
    }
}
