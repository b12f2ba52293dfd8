import ATSLint
import ATSPolicy
import Foundation
import Testing

/// The three output formats, parsed back where they are machine-readable.
@Suite struct LintReportTests {
    static let body = """
        <dict>\(arbitrary)<key>NSExceptionDomains</key><dict>
        <key>api.example.com</key><dict><key>NSExceptionAllowsInsecureHTTPLoads</key><true/>
          <key>NSExceptionMinimumTLSVersion</key><string>TLSV1.3</string></dict>
        </dict></dict>
        """

    func report() throws -> LintReport {
        LintReport(
            artifactPath: "config/My App.plist", sourceDescription: "config/My App.plist", profile: .ios17,
            findings: try LintFixture.findings(Self.body, profile: .ios17), notes: ["a \"quoted\" note\twith a tab"])
    }

    @Test func textHasOneGroupPerFinding() throws {
        let r = try report()
        let text = r.text()
        #expect(text.hasPrefix("config/My App.plist (iOS 17): \(r.summary)\n"))
        #expect(text.contains("  note: a \"quoted\" note\twith a tab\n"))
        for f in r.findings {
            #expect(
                text.contains(
                    "\n\(f.severity.rawValue)[\(f.ruleID)] \(f.keyPathString)\n  \(f.message)\n  fix: \(f.fix)\n"))
        }
        #expect(
            text.contains(
                "error[ATS007] NSAppTransportSecurity/NSExceptionDomains/api.example.com/NSExceptionMinimumTLSVersion"))
    }

    @Test func jsonParsesBack() throws {
        let r = try report()
        let object = try JSONSerialization.jsonObject(with: Data(r.json().utf8)) as? [String: Any]
        let root = try #require(object)
        #expect(root["file"] as? String == "config/My App.plist")
        #expect(root["ios"] as? Int == 17)
        #expect(root["notes"] as? [String] == ["a \"quoted\" note\twith a tab"])
        let summary = try #require(root["summary"] as? [String: Int])
        #expect(summary == ["error": r.count(.error), "warning": r.count(.warning), "note": r.count(.note)])
        let findings = try #require(root["findings"] as? [[String: Any]])
        #expect(findings.count == r.findings.count)
        for (json, f) in zip(findings, r.findings) {
            #expect(json["ruleID"] as? String == f.ruleID)
            #expect(json["severity"] as? String == f.severity.rawValue)
            #expect(json["keyPath"] as? [String] == f.keyPath)
            #expect(json["message"] as? String == f.message)
            #expect(json["fix"] as? String == f.fix)
        }
    }

    /// The SARIF 2.1.0 fields code-scanning tools require, checked on the parsed document.
    @Test func sarifHasTheRequiredStructure() throws {
        let r = try report()
        #expect(!r.findings.isEmpty)
        let root = try #require(try JSONSerialization.jsonObject(with: Data(r.sarif().utf8)) as? [String: Any])
        #expect(root["version"] as? String == "2.1.0")
        #expect((root["$schema"] as? String)?.contains("sarif-2.1.0") == true)
        let runs = try #require(root["runs"] as? [[String: Any]])
        #expect(runs.count == 1)
        let driver = try #require((runs[0]["tool"] as? [String: Any])?["driver"] as? [String: Any])
        #expect(driver["name"] as? String == "atsproxy lint")
        let rules = try #require(driver["rules"] as? [[String: Any]])
        #expect(rules.map { $0["id"] as? String } == LintRule.allCases.map(\.rawValue))
        for rule in rules {
            #expect(((rule["shortDescription"] as? [String: Any])?["text"] as? String)?.isEmpty == false)
            let level = (rule["defaultConfiguration"] as? [String: Any])?["level"] as? String
            #expect(["error", "warning", "note"].contains(level ?? ""))
        }
        let results = try #require(runs[0]["results"] as? [[String: Any]])
        #expect(results.count == r.findings.count)
        for (result, f) in zip(results, r.findings) {
            #expect(result["ruleId"] as? String == f.ruleID)
            let index = try #require(result["ruleIndex"] as? Int)
            #expect(rules[index]["id"] as? String == f.ruleID)
            #expect(result["level"] as? String == f.severity.rawValue)
            let text = try #require((result["message"] as? [String: Any])?["text"] as? String)
            #expect(text.contains(f.message) && text.contains(f.fix))
            let location = try #require((result["locations"] as? [[String: Any]])?.first)
            let uri = ((location["physicalLocation"] as? [String: Any])?["artifactLocation"] as? [String: Any])?["uri"]
            #expect(uri as? String == "config/My%20App.plist")
            let logical = try #require((location["logicalLocations"] as? [[String: Any]])?.first)
            #expect(logical["fullyQualifiedName"] as? String == f.keyPath.joined(separator: "/"))
        }
    }

    @Test("SARIF results carry a region: the line and column of the offending key, or of its nearest enclosing key")
    func sarifRegions() throws {
        let findings = [
            LintFinding(
                severity: .error, ruleID: "ATS001",
                keyPath: ["NSAppTransportSecurity", "NSExceptionDomains", "a.test", "NSExceptionMinimumTLSVersion"],
                message: "Did you mean NSExceptionDomains?", fix: "Rename the key."),
            LintFinding(
                severity: .warning, ruleID: "ATS002", keyPath: ["NSAppTransportSecurity", "NSExceptionDomains", "b.test"],
                message: "A domain that is not in the file", fix: "add it"),
            LintFinding(severity: .note, ruleID: "ATS003", keyPath: ["Elsewhere"], message: "m", fix: "f"),
        ]
        let positions: [[String]: LintReport.SourceRegion] = [
            ["NSExceptionDomains"]: .init(line: 3, column: 2),
            ["NSExceptionDomains", "a.test", "NSExceptionMinimumTLSVersion"]: .init(line: 7, column: 4),
        ]
        let r = LintReport(
            artifactPath: "ats.plist", sourceDescription: "ats.plist", profile: .ios26, findings: findings,
            keyPositions: positions)
        let root = try #require(try JSONSerialization.jsonObject(with: Data(r.sarif().utf8)) as? [String: Any])
        let results = try #require((root["runs"] as? [[String: Any]])?.first?["results"] as? [[String: Any]])
        func region(_ i: Int) -> [String: Any]? {
            let location = (results[i]["locations"] as? [[String: Any]])?.first
            return (location?["physicalLocation"] as? [String: Any])?["region"] as? [String: Any]
        }
        // A file holding the ATS dictionary alone: its keys have no NSAppTransportSecurity in front.
        #expect(region(0)?["startLine"] as? Int == 7)
        #expect(region(0)?["startColumn"] as? Int == 4)
        #expect(region(1)?["startLine"] as? Int == 3, "the nearest enclosing key that is in the file")
        #expect(region(2) == nil, "no key of the path in the file: the whole file")
        let message = (results[0]["message"] as? [String: Any])?["text"] as? String
        #expect(message == "Did you mean NSExceptionDomains? Fix: Rename the key.")
        #expect((results[1]["message"] as? [String: Any])?["text"] as? String
            == "A domain that is not in the file. Fix: add it.")
    }

    @Test func noFindingsGiveAnEmptyResultsArray() throws {
        let r = LintReport(artifactPath: "a.plist", sourceDescription: "a.plist", profile: .ios26, findings: [])
        let root = try #require(try JSONSerialization.jsonObject(with: Data(r.sarif().utf8)) as? [String: Any])
        let results = (root["runs"] as? [[String: Any]])?.first?["results"] as? [Any]
        #expect(results?.isEmpty == true)
        #expect(r.text() == "a.plist (iOS 26): 0 errors, 0 warnings, 0 notes\n")
    }

    @Test(arguments: [
        (LintSeverity.error, [false, false, true]), (.warning, [false, true, true]), (.note, [true, true, true]),
    ])
    func failsAtThreshold(threshold: LintSeverity, expected: [Bool]) {
        let reports = LintSeverity.allCases.map { severity in
            LintReport(
                artifactPath: "a", sourceDescription: "a", profile: .ios26,
                findings: [LintFinding(severity: severity, ruleID: "ATS001", keyPath: [], message: "m", fix: "f")])
        }
        #expect(reports.map { $0.fails(at: threshold) } == expected)
    }
}
