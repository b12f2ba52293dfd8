import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Rules in a real browser")
struct RulesBrowserTests {
    /// Tests/webview/faults_browser_test.py: headless Chromium through `run` with --map-local and --fault rules, its
    /// certificate store trusting the proxy's CA. Screenshots go to .build/test-artefacts/webview.
    @Test("Chromium gets the mocked page, a certificate error page for --fault expired, and a version error for tls1.0",
          .timeLimit(.minutes(4)))
    func browser() throws {
        try WebViewScript.run("faults_browser_test.py", bound: 150)
    }
}
