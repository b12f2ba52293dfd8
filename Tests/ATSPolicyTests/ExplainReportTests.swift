import ATSPolicy
import Foundation
import Testing

struct ExplainReportTests {
    static let urls: [(String, String?, String?, Int?)] = [
        ("https://api.example.com/v1?x=1", "https", "api.example.com", 443),
        ("http://user@Media.Example.com:8080/a", "http", "Media.Example.com", 8080),
        ("https://[2001:db8::1]:8443/", "https", "2001:db8::1", 8443),
        ("WSS://chat.example", "wss", "chat.example", 443),
        ("api.example.com", nil, nil, nil),
        ("ftp://files.example.com", nil, nil, nil),
        ("https://host:99999/", nil, nil, nil),
        ("https:///path", nil, nil, nil),
    ]

    @Test("URL parsing keeps the host exactly as written", arguments: urls)
    func parse(url: String, scheme: String?, host: String?, port: Int?) {
        let t = try? ConnectionTarget(parsing: url)
        #expect(t?.scheme == scheme && t?.host == host && t?.port == port)
    }

    @Test("text: a blocked URL shows -1022, the deciding rule and a paste-ready fix")
    func blockedText() {
        let report = ExplainReport(
            policy: policy(ConfigExample.browser, .ios17), urls: ["http://api.example.com/"], source: "Info.plist")
        let text = report.renderText()
        #expect(report.anyBlocked)
        #expect(
            text.contains(
                "Verdict: BLOCKED before connecting — -1022 NSURLErrorAppTransportSecurityRequiresSecureConnection"))
        #expect(text.contains("Decided by: NSAppTransportSecurity › NSExceptionDomains › api.example.com"))
        #expect(text.contains("Fix: set in NSExceptionDomains › api.example.com:"))
        // The app already has an entry for the host: only the key to add, not a second NSExceptionDomains.
        #expect(text.contains("Paste inside NSAppTransportSecurity › NSExceptionDomains › api.example.com"))
        #expect(text.contains("\n    <key>NSExceptionAllowsInsecureHTTPLoads</key>\n    <true/>\n"), "\(text)")
        #expect(!text.contains("<key>NSExceptionDomains</key>"))
    }

    @Test("text: an allowed URL lists versions, suites in order and notes")
    func allowedText() {
        let report = ExplainReport(
            policy: policy(ConfigExample.lessSecure, .ios17), urls: ["https://less-secure.example.com"], source: "p")
        let text = report.renderText()
        #expect(!report.anyBlocked)
        #expect(report.items[0].verdict == "exception")
        #expect(text.contains("TLS: minimum TLSv1.0; offers TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3"))
        #expect(text.contains("Cipher suites offered (17, in order):\n    0x009D TLS_RSA_WITH_AES_256_GCM_SHA384"))
        #expect(text.contains("Note: Cipher list: Security-60158 onwards"))
    }

    @Test("verdict labels: full ATS, ATS off, invalid")
    func verdicts() {
        let report = ExplainReport(
            policy: policy(ConfigExample.browser, .ios26),
            urls: ["https://news.example.org", "https://api.example.com", "nonsense"], source: "p")
        #expect(report.items.map(\.verdict) == ["no-ats", "exception", "invalid"])
        let full = ExplainReport(policy: policy(nil, .ios26), urls: ["https://x.example"], source: "p")
        #expect(full.items[0].verdict == "full-ats")
        #expect(report.anyInvalid)
    }

    @Test("policy problems are listed before the URLs")
    func diagnosticsShown() {
        let report = ExplainReport(policy: policy(dict(["NSAllowsArbitraryLoads": str("YES")])), urls: [], source: "p")
        #expect(
            report.renderText().contains(
                "Policy findings (1):\n  error: NSAppTransportSecurity › NSAllowsArbitraryLoads: must be a Boolean"))
    }

    @Test("JSON carries the verdict, the violation codes and the requirements")
    func json() throws {
        let report = ExplainReport(
            policy: policy(nil, .ios17), urls: ["http://a.example", "https://a.example"], source: "p")
        let data = Data(try report.renderJSON().utf8)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let items = try #require(object["items"] as? [[String: Any]])
        #expect(items.map { $0["verdict"] as? String } == ["blocked", "full-ats"])
        let violation = try #require(items[0]["violation"] as? [String: Any])
        #expect((violation["urlError"] as? [String: Any])?["code"] as? Int == -1022)
        let req = try #require(items[1]["requirements"] as? [String: Any])
        #expect((req["offeredCipherSuites"] as? [Any])?.count == 13)
    }

    @Test("findings are listed most severe first")
    func findingsOrder() {
        let ats = dict([
            "NSExceptionDomains": domains(["h.example": dict(["NSExceptionMinimumTLSVersion": str("TLSv1.0")])]),
            "NSAllowsArbitraryLoads": str("YES"),
        ])
        let text = ExplainReport(policy: policy(ats, .ios17), urls: [], source: "p").renderText()
        let error = text.range(of: "error: NSAppTransportSecurity › NSAllowsArbitraryLoads")
        let info = text.range(of: "info: NSAppTransportSecurity › NSExceptionDomains › h.example")
        #expect(error != nil && info != nil)
        if let error, let info { #expect(error.lowerBound < info.lowerBound) }
    }
}
