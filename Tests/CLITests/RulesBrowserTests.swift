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
        let root = TestPython.packageRoot
        let artifacts = root.appendingPathComponent(".build/test-artefacts/webview").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try TestPython.path())
        p.arguments = [root.appendingPathComponent("Tests/webview/faults_browser_test.py").path,
                       "--atsproxy", RunCLITests.binary, "--artifacts", artifacts]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        // The script bounds itself (150 s); this is the backstop should it hang before its alarm is set.
        let watchdog = DispatchWorkItem { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 200, execute: watchdog)
        defer { watchdog.cancel() }
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(text)")
    }
}
