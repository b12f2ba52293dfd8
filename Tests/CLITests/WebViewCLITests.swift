import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

// Serialized: each browser test starts a headless Chromium, and six of them at once on a 2-core machine starved the
// other suites' timing-sensitive tests (a 1 s handshake timeout answered after 23 s).
@Suite(.serialized) struct WebViewCLITests {
    @Test(arguments: [
        (["--web", "0.0.0.0:8081"], "--web 0.0.0.0 is not a loopback address"),
        (["--web", "0.0.0.0:8081", "--allow-lan"], "--web on 0.0.0.0 without credentials"),
        (["--web", "127.0.0.1:99999"], "--web '127.0.0.1:99999': the port 99999 is out of range"),
    ])
    func exposedOrMalformedWebAddressesAreUsageErrors(args: [String], message: String) throws {
        let run = try RunCLITests.run(args)
        #expect(run.status == 64, "\(run.stderr)")
        #expect(run.stderr.contains(message), "\(run.stderr)")
        #expect(!run.stdout.contains("listening"))
    }

    @Test("view on a file that is not a capture says so and exits 2")
    func viewRefusesOtherFiles() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-capture-\(UUID().uuidString).txt")
        try Data("hello".utf8).write(to: file)
        defer { unlink(file.path) }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: RunCLITests.binary)
        p.arguments = ["view", file.path, "--web", "127.0.0.1:0"]
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 2)
        #expect(text.contains("not an ATSProxy capture"), "\(text)")
    }

    /// Tests/webview/browser_test.py: headless Chromium (Selenium, chromedriver) against `run --web` with curl's
    /// traffic. Screenshots go to .build/test-artefacts/webview.
    @Test("The web view in a real browser: live rows, a blocked load's error and fix, filters, keyboard, summary",
          .timeLimit(.minutes(5)))
    func browser() throws {
        try WebViewScript.run("browser_test.py", bound: 240)
    }

    /// Tests/webview/rules_browser_test.py: the rules in the web view (issue 33) in headless Chromium: a
    /// `--map-local` answer's badge, the Rules panel's switch (the next request then reaches the server), a rule made
    /// from the detail pane. Screenshots go to .build/test-artefacts/webview.
    @Test("Rules in a real browser: the map-local badge, switched off in the Rules panel, a fault made from an exchange",
          .timeLimit(.minutes(4)))
    func rulesInTheBrowser() throws {
        try WebViewScript.run("rules_browser_test.py", bound: 180)
    }

    /// Tests/webview/faults_browser_test.py: headless Chromium through `run` with --map-local and --fault rules, its
    /// certificate store trusting the proxy's CA. Screenshots go to .build/test-artefacts/webview.
    @Test("Chromium gets the mocked page, a certificate error page for --fault expired, and a version error for tls1.0",
          .timeLimit(.minutes(4)))
    func faultsInTheBrowser() throws {
        try WebViewScript.run("faults_browser_test.py", bound: 150)
    }

    /// Tests/webview/breakpoint_test.py: `run --breakpoint 'request:text:/held' --breakpoint 'response:text:/late'
    /// --web`, curl through it, each held request released through the web view's API (GET /api/held,
    /// POST /api/held/ID): executed edited, answered, aborted, and left to time out; held responses changed to a 503,
    /// executed as held (plain HTTP), aborted (issue 34).
    @Test("Breakpoints end to end: curl held, released through the web view's API", .timeLimit(.minutes(3)))
    func breakpoints() throws {
        try WebViewScript.run("breakpoint_test.py", bound: 120, artifacts: false)
    }

    /// Tests/webview/hold_browser_test.py: the held-exchange editor in headless Chromium (issue 34): curl's request
    /// held and marked HELD at once, a header added and the URL changed, executed (the origin sees the edit, curl
    /// gets its answer); aborted (curl's connection fails); answered locally; "Break on the next request to this
    /// URL" from the detail pane; a held response changed to a 503 in the editor. A screenshot of the editor goes to .build/test-artefacts/webview.
    @Test("The held-exchange editor in a real browser: edited and executed, aborted, answered, break on a URL",
          .timeLimit(.minutes(4)))
    func heldEditorInTheBrowser() throws {
        try WebViewScript.run("hold_browser_test.py", bound: 180)
    }

    /// Tests/webview/replay_test.py: replay, compose and compare (issue 34) end to end: a recording origin sees the
    /// replay's head and body as the original's (hop-by-hop fields aside) and an edited replay's edit, through
    /// `atsproxy replay`, `POST /api/replay` and headless Chromium (Replay, Edit and replay, Compare, Compose).
    @Test("Replay, compose and compare: the CLI, the API and a real browser against a recording origin",
          .timeLimit(.minutes(4)))
    func replayEndToEnd() throws {
        try WebViewScript.run("replay_test.py", bound: 180)
    }
}

/// Runs one of Tests/webview's scripts against the built binary and expects it to pass; its output is the failure's
/// message. The script bounds itself (`bound` seconds); a watchdog kills it 40 s later should it hang before its
/// alarm is set.
enum WebViewScript {
    static func run(_ script: String, bound: Int, artifacts: Bool = true) throws {
        let root = TestPython.packageRoot
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try TestPython.path())
        p.arguments = [root.appendingPathComponent("Tests/webview/\(script)").path, "--atsproxy", RunCLITests.binary]
            + (artifacts ? ["--artifacts", root.appendingPathComponent(".build/test-artefacts/webview").path] : [])
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        let watchdog = DispatchWorkItem { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(bound + 40), execute: watchdog)
        defer { watchdog.cancel() }
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(text)")
    }
}
