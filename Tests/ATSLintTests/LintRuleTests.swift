import ATSLint
import ATSPolicy
import Testing

/// Each rule with positive and negative rows; every row is linted from an XML file and from its binary twin.
@Suite struct LintRuleTests {
    @Test(arguments: positiveCases)
    func ruleFires(_ c: RuleCase) throws {
        let findings = try LintFixture.findings(c.body, profile: c.profile)
        let hits = findings.filter { $0.ruleID == c.rule.rawValue }
        #expect(!hits.isEmpty, "no \(c.rule.rawValue) in \(findings)")
        guard let hit = hits.first(where: { c.path == nil || $0.keyPathString == c.path }) else {
            Issue.record("no \(c.rule.rawValue) at \(c.path ?? "-"): \(hits.map(\.keyPathString))")
            return
        }
        if let severity = c.severity { #expect(hit.severity == severity) }
        if let text = c.messageContains { #expect(hit.message.contains(text), "\(hit.message)") }
        if let text = c.fixContains { #expect(hit.fix.contains(text), "\(hit.fix)") }
    }

    @Test(arguments: negativeCases)
    func ruleStaysQuiet(_ c: RuleCase) throws {
        let findings = try LintFixture.findings(c.body, profile: c.profile)
        #expect(!findings.contains { $0.ruleID == c.rule.rawValue }, "\(findings)")
    }

    /// Every rule has a positive and a negative row (ATS026/ATS027 are tested on their own below).
    @Test func everyRuleIsCovered() {
        let own: Set<LintRule> = [.atsNotDictionary, .atsKeyOutsideATS]
        #expect(Set(positiveCases.map(\.rule)).union(own) == Set(LintRule.allCases))
        #expect(Set(negativeCases.map(\.rule)).union(own) == Set(LintRule.allCases))
    }

    /// Every finding anywhere in the table has a key path rooted at NSAppTransportSecurity, a message and a fix.
    @Test func everyFindingIsActionable() throws {
        for c in positiveCases {
            for f in try LintFixture.findings(c.body, profile: c.profile) {
                #expect(f.keyPath.first == "NSAppTransportSecurity", "\(f)")
                #expect(!f.message.isEmpty && !f.fix.isEmpty, "\(f)")
                #expect(LintRule(rawValue: f.ruleID) != nil)
            }
        }
    }

    @Test(arguments: [
        (PlistValue.string("YES"), "a String (\"YES\")"), (.array([]), "an Array"), (.bool(true), "a Boolean (YES)"),
    ])
    func atsValueOfTheWrongType(value: PlistValue, shown: String) {
        let findings = lint(value, profile: .ios26)
        #expect(findings.count == 1)
        #expect(findings.first?.ruleID == "ATS026")
        #expect(findings.first?.severity == .error)
        #expect(findings.first?.keyPath == ["NSAppTransportSecurity"])
        #expect(findings.first?.message.contains(shown) == true)
    }

    @Test func absentATSHasNothingToLint() {
        #expect(lint(nil, profile: .ios26).isEmpty)
    }

    @Test func atsKeysAtTheInfoPlistRoot() throws {
        let misplacedBody = """
            <dict><key>CFBundleIdentifier</key><string>com.example.app</string>\(arbitrary)</dict>
            """
        let cleanBody = """
            <dict><key>CFBundleIdentifier</key><string>com.example.app</string>
            <key>NSAppTransportSecurity</key><dict/></dict>
            """
        for bytes in [LintFixture.xml(misplacedBody), try LintFixture.binary(fromXML: LintFixture.xml(misplacedBody))] {
            let loaded = try LintFixture.load(bytes, name: "Info.plist")
            let findings = lintInfoPlistRoot(misplacedATSKeys: loaded.misplacedATSKeys)
            #expect(findings.map(\.ruleID) == ["ATS027"])
            #expect(findings.first?.keyPath == ["NSAllowsArbitraryLoads"])
            #expect(findings.first?.fix.contains("inside the NSAppTransportSecurity dictionary") == true)
        }
        let clean = try LintFixture.load(LintFixture.xml(cleanBody), name: "Info.plist")
        #expect(lintInfoPlistRoot(misplacedATSKeys: clean.misplacedATSKeys).isEmpty)
    }

    @Test func findingsAreOrderedByKeyPath() throws {
        let body = """
            <dict><key>NSExceptionDomains</key><dict>
            <key>b.example.com</key><dict><key>NSExceptionRequiresForwardSecrecy</key><false/></dict>
            <key>a.example.com</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/></dict>
            </dict>\(arbitrary)</dict>
            """
        let paths = try LintFixture.findings(body, profile: .ios26).map(\.keyPathString)
        #expect(paths == paths.sorted { $0.split(separator: "/").lexicographicallyPrecedes($1.split(separator: "/")) })
        #expect(paths.first == "NSAppTransportSecurity/NSAllowsArbitraryLoads")
    }
}
