import ATSLint
import ATSPolicy
import Foundation
import PolicyLoader
import TestSupport

/// Lints an ATS dictionary written as XML, loaded through `PolicyLoader` from a temporary file in XML and again
/// re-encoded as a binary plist; both must give the same findings.
enum LintFixture {
    static func xml(_ body: String) -> [UInt8] { PlistFixture.xml(body) }

    static func binary(fromXML xml: [UInt8]) throws -> [UInt8] { try PlistFixture.binary(fromXML: xml) }

    /// Writes `bytes` to a fresh temporary folder and loads them.
    static func load(_ bytes: [UInt8], name: String = "ats.plist") throws -> LoadedPolicy {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ATSLintTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let url = dir.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return try PolicyLoader.load(path: url.path)
    }

    /// Findings for `body` from the XML file; throws if the binary twin gives different findings.
    static func findings(_ body: String, profile: IOSProfile) throws -> [LintFinding] {
        let x = xml(body)
        let fromXML = lint(try load(x).atsDictionary, profile: profile)
        let fromBinary = lint(try load(try binary(fromXML: x)).atsDictionary, profile: profile)
        guard fromXML == fromBinary else { throw Mismatch(xml: fromXML, binary: fromBinary) }
        return fromXML
    }

    struct Mismatch: Error, CustomStringConvertible {
        let xml: [LintFinding]
        let binary: [LintFinding]
        var description: String { "XML findings \(xml) differ from binary findings \(binary)" }
    }

    /// `<dict><key>NSExceptionDomains</key><dict><key>host</key><dict>entry</dict></dict></dict>`
    static func domain(_ host: String, _ entry: String, extra: String = "") -> String {
        "<dict>\(extra)<key>NSExceptionDomains</key><dict><key>\(host)</key><dict>\(entry)</dict></dict></dict>"
    }

    /// `<dict><key>NSPinnedDomains</key><dict><key>host</key><dict>entry</dict></dict></dict>`
    static func pinned(_ host: String, _ entry: String) -> String {
        "<dict><key>NSPinnedDomains</key><dict><key>\(host)</key><dict>\(entry)</dict></dict></dict>"
    }

    static func leafPins(_ hashes: [String]) -> String {
        "<key>NSPinnedLeafIdentities</key><array>"
            + hashes.map { "<dict><key>SPKI-SHA256-BASE64</key><string>\($0)</string></dict>" }.joined()
            + "</array>"
    }

    /// Base64 of 32 zero bytes: a well-formed SHA-256 pin.
    static let goodPin = String(repeating: "A", count: 43) + "="
}
