import Foundation
import TestSupport
import Testing

/// `atsproxy lint` run as a user would: the built binary, on the `config/` examples and on fixtures written to a
/// temporary folder.
@Suite struct LintCLITests {
    /// Package root, found from this file (Tests/CLITests/ → root).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let binary = root.appendingPathComponent(".build/debug/atsproxy").path
    static func config(_ name: String) -> String { root.appendingPathComponent("config/\(name)").path }

    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs `atsproxy lint args…` and waits for it (the process reads one small file and exits).
    static func lint(_ args: [String]) throws -> Run {
        let run = try runCommand(binary, ["lint"] + args)
        return Run(status: run.status, stdout: run.stdoutText, stderr: run.stderrText)
    }

    /// A temporary folder holding `files`, removed after `body`.
    static func withFiles<T>(_ files: [String: [UInt8]], _ body: (URL) throws -> T) throws -> T {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("LintCLITests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, bytes) in files { try Data(bytes).write(to: dir.appendingPathComponent(name)) }
        return try body(dir)
    }

    static func xml(_ body: String) -> [UInt8] {
        Array(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0">
            \(body)
            </plist>

            """.utf8)
    }

    /// Zips `infoPlist` as `Payload/<app>.app/Info.plist` into the .ipa at `ipa` (python3's zipfile; no zip tool).
    static func zipIPA(_ ipa: String, app: String, infoPlist: String) throws {
        let zip = try runCommand("python3", [
            "-c", "import sys, zipfile; zipfile.ZipFile(sys.argv[1], 'w').write(sys.argv[2], sys.argv[3])",
            ipa, infoPlist, "Payload/\(app).app/Info.plist",
        ])
        #expect(zip.status == 0, "\(zip.stderrText)")
    }

    static func binaryPlist(_ xml: [UInt8]) throws -> [UInt8] {
        let any = try PropertyListSerialization.propertyList(from: Data(xml), options: [], format: nil)
        return [UInt8](try PropertyListSerialization.data(fromPropertyList: any, format: .binary, options: 0))
    }

    // MARK: - config/ examples

    @Test(arguments: [
        ("apple-default.plist", [String](), Int32(0), "0 errors, 0 warnings, 0 notes"),
        (
            "media-server.plist", [], 0,
            "warning[ATS004] NSAppTransportSecurity/NSExceptionDomains/media-server.example.com"
        ),
        ("old-tls-server.plist", [], 1, "error[ATS006]"),
        ("old-tls-server.plist", ["--ios", "17"], 0, "warning[ATS005]"),
        ("old-tls-server.plist", ["--ios", "16"], 0, "iOS 16 is checked with the iOS 14 behaviour band"),
        ("browser-app.plist", [], 0, "warning[ATS001] NSAppTransportSecurity/NSAllowsArbitraryLoads"),
        ("chat-app.plist", ["--fail-on", "warning"], 1, "warning[ATS008]"),
    ])
    func configExample(file: String, args: [String], status: Int32, expected: String) throws {
        let run = try Self.lint([Self.config(file)] + args)
        #expect(run.status == status, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.contains(expected), "\(run.stdout)")
        #expect(run.stderr.isEmpty)
    }

    /// `explain` and `run` fall back to Apple's defaults without a policy; lint has nothing to check without one.
    @Test func policyIsRequired() throws {
        let run = try Self.lint(["--ios", "17"])
        #expect(run.status == 64)
        #expect(run.stderr.contains("Missing expected argument '<path>'"), "\(run.stderr)")
    }

    @Test func textReportShowsMessageAndFix() throws {
        let run = try Self.lint([Self.config("old-tls-server.plist"), "--ios", "17"])
        #expect(run.stdout.hasPrefix("\(Self.config("old-tls-server.plist")) (iOS 17): 0 errors, 2 warnings, 0 notes"))
        let path = "NSAppTransportSecurity/NSExceptionDomains/less-secure.example.com/NSExceptionMinimumTLSVersion"
        #expect(
            run.stdout.contains(
                "warning[ATS005] \(path)\n  less-secure.example.com may use TLSv1.0, below ATS's TLS 1.2"))
        #expect(run.stdout.contains("  fix: upgrade less-secure.example.com to TLS 1.2 or later"))
    }

    // MARK: - --fail-on

    /// chat-app has warnings and a note but no error; a web-content-only policy has a single note.
    @Test(arguments: [
        ("chat-app.plist", "error", Int32(0)), ("chat-app.plist", "warning", 1), ("chat-app.plist", "note", 1),
        ("apple-default.plist", "error", 0), ("apple-default.plist", "warning", 0), ("apple-default.plist", "note", 0),
        ("old-tls-server.plist", "error", 1), ("old-tls-server.plist", "warning", 1),
        ("old-tls-server.plist", "note", 1),
    ])
    func failOnThresholdForExamples(file: String, threshold: String, status: Int32) throws {
        #expect(try Self.lint([Self.config(file), "--fail-on", threshold]).status == status)
    }

    @Test(arguments: [("error", Int32(0)), ("warning", 0), ("note", 1)])
    func failOnThresholdForANoteOnlyPolicy(threshold: String, status: Int32) throws {
        let x = Self.xml("<dict><key>NSAllowsArbitraryLoadsInWebContent</key><true/></dict>")
        try Self.withFiles(["web.plist": x, "web.bplist": try Self.binaryPlist(x)]) { dir in
            for name in ["web.plist", "web.bplist"] {
                let run = try Self.lint([dir.appendingPathComponent(name).path, "--fail-on", threshold])
                #expect(run.status == status, "\(name): \(run.stdout)")
                #expect(run.stdout.contains("note[ATS003]"))
            }
        }
    }

    // MARK: - JSON and SARIF

    @Test("SARIF results point at the offending key's line and column in the plist")
    func sarifRegionsFromTheFile() throws {
        let plist = """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0">
            <dict>
              <key>NSAppTransportSecurity</key>
              <dict>
                <key>NSEExceptionDomains</key>
                <dict/>
              </dict>
            </dict>
            </plist>
            """
        let run = try Self.withFiles(["ats.plist": Array(plist.utf8)]) { dir in
            try Self.lint([dir.appendingPathComponent("ats.plist").path, "--format", "sarif"])
        }
        let s = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let results = try #require((s["runs"] as? [[String: Any]])?.first?["results"] as? [[String: Any]])
        let typo = try #require(results.first { ($0["message"] as? [String: Any])?["text"] as? String != nil
            && (($0["message"] as? [String: Any])?["text"] as? String)?.contains("NSEExceptionDomains") == true })
        let location = (typo["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any]
        let region = location?["region"] as? [String: Any]
        #expect(region?["startLine"] as? Int == 6)
        #expect(region?["startColumn"] as? Int == 5)
        let text = try #require((typo["message"] as? [String: Any])?["text"] as? String)
        #expect(!text.contains("?."), "\(text)")
        #expect(text.contains("? Fix: "), "\(text)")
    }

    @Test func jsonAndSarifAgree() throws {
        let path = Self.config("chat-app.plist")
        let json = try Self.lint([path, "--format", "json"])
        let sarif = try Self.lint([path, "--format", "sarif"])
        #expect(json.status == 0 && sarif.status == 0)
        let j = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        let findings = try #require(j["findings"] as? [[String: Any]])
        #expect(findings.compactMap { $0["ruleID"] as? String } == ["ATS001", "ATS020", "ATS008"])

        let s = try #require(try JSONSerialization.jsonObject(with: Data(sarif.stdout.utf8)) as? [String: Any])
        #expect(s["version"] as? String == "2.1.0")
        let run = try #require((s["runs"] as? [[String: Any]])?.first)
        let driver = (run["tool"] as? [String: Any])?["driver"] as? [String: Any]
        #expect(driver?["name"] as? String == "atsproxy lint")
        let results = try #require(run["results"] as? [[String: Any]])
        #expect(results.compactMap { $0["ruleId"] as? String } == ["ATS001", "ATS020", "ATS008"])
        #expect(results.compactMap { $0["level"] as? String } == ["warning", "note", "warning"])
        let location = (results.first?["locations"] as? [[String: Any]])?.first
        let artifact = (location?["physicalLocation"] as? [String: Any])?["artifactLocation"] as? [String: Any]
        #expect(artifact?["uri"] as? String == path)
        let logical = (location?["logicalLocations"] as? [[String: Any]])?.first
        #expect(logical?["fullyQualifiedName"] as? String == "NSAppTransportSecurity/NSAllowsArbitraryLoads")
    }

    // MARK: - Whole Info.plist, .ipa and load errors

    @Test func wholeInfoPlistAndIPA() throws {
        let info = Self.xml(
            """
            <dict><key>CFBundleIdentifier</key><string>com.example.app</string>
            <key>NSAllowsArbitraryLoads</key><true/>
            <key>NSAppTransportSecurity</key><dict><key>NSAllowsArbitraryLoads</key><string>YES</string></dict></dict>
            """)
        try Self.withFiles(["Info.plist": try Self.binaryPlist(info)]) { dir in
            let plist = dir.appendingPathComponent("Info.plist").path
            let run = try Self.lint([plist])
            #expect(run.status == 1)
            #expect(run.stdout.contains("error[ATS027] NSAllowsArbitraryLoads\n"))
            #expect(run.stdout.contains("error[ATS017] NSAppTransportSecurity/NSAllowsArbitraryLoads\n"))

            let ipa = dir.appendingPathComponent("My App.ipa").path
            try Self.zipIPA(ipa, app: "My App", infoPlist: plist)
            let fromIPA = try Self.lint([ipa, "--format", "sarif"])
            #expect(fromIPA.status == 1)
            #expect(fromIPA.stdout.contains("My%20App.ipa"))
            let text = try Self.lint([ipa])
            #expect(text.stdout.hasPrefix("My App.ipa › Payload/My App.app/Info.plist (iOS 26): 2 errors"))
        }
    }

    @Test(
        arguments: [
            ("missing.plist", nil, "missing.plist: file not found"),
            (
                "trunc.plist", "<?xml version=\"1.0\"?><plist><dict><key>NSAllowsArbitraryLoads</key>",
                "malformed property list"
            ),
            ("text.plist", "NSAllowsArbitraryLoads = YES", "not a property list"),
            ("empty.plist", "", "empty.plist: the file is empty"),
            (
                "Info.plist",
                "<?xml version=\"1.0\"?><plist><dict><key>NSAppTransportSecurity</key><string>x</string></dict>"
                    + "</plist>",
                "Info.plist › NSAppTransportSecurity: is a String, not a Dictionary"
            ),
        ] as [(String, String?, String)])
    func loadErrorsExitTwo(name: String, content: String?, message: String) throws {
        let files = content.map { [name: Array($0.utf8)] } ?? [:]
        try Self.withFiles(files) { dir in
            let run = try Self.lint([dir.appendingPathComponent(name).path, "--fail-on", "note"])
            #expect(run.status == 2)
            #expect(run.stdout.isEmpty)
            #expect(run.stderr.hasPrefix("atsproxy lint: error: "))
            #expect(run.stderr.contains(message), "\(run.stderr)")
        }
    }

    /// A folder that is not a bundle (a mistyped path such as /tmp) is named as such.
    @Test func plainFolderIsNotABundle() throws {
        try Self.withFiles(["notes.txt": Array("x".utf8)]) { dir in
            let run = try Self.lint([dir.path])
            #expect(run.status == 2)
            #expect(run.stderr.contains("\(dir.path): a folder, not an .app bundle"), "\(run.stderr)")
        }
    }

    @Test(arguments: [["--ios", "8"], ["--format", "xml"], ["--fail-on", "fatal"]])
    func usageErrors(args: [String]) throws {
        let run = try Self.lint([Self.config("apple-default.plist")] + args)
        #expect(run.status == 64)
        #expect(run.stdout.isEmpty)
    }
}
