import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct WebViewCLITests {
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
        let root = TestPython.packageRoot
        let artifacts = root.appendingPathComponent(".build/test-artefacts/webview").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try TestPython.path())
        p.arguments = [root.appendingPathComponent("Tests/webview/browser_test.py").path,
                       "--atsproxy", RunCLITests.binary, "--artifacts", artifacts]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        // The script bounds itself (240 s); this is the backstop should it hang before its alarm is set.
        let watchdog = DispatchWorkItem { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 280, execute: watchdog)
        defer { watchdog.cancel() }
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(text)")
    }

    /// Tests/webview/rules_browser_test.py: the rules in the web view (issue 33) in headless Chromium: a
    /// `--map-local` answer's badge, the Rules panel's switch (the next request then reaches the server), a rule made
    /// from the detail pane. Screenshots go to .build/test-artefacts/webview.
    @Test("Rules in a real browser: the map-local badge, switched off in the Rules panel, a fault made from an exchange",
          .timeLimit(.minutes(4)))
    func rulesInTheBrowser() throws {
        let root = TestPython.packageRoot
        let artifacts = root.appendingPathComponent(".build/test-artefacts/webview").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try TestPython.path())
        p.arguments = [root.appendingPathComponent("Tests/webview/rules_browser_test.py").path,
                       "--atsproxy", RunCLITests.binary, "--artifacts", artifacts]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        // The script bounds itself (180 s); this is the backstop should it hang before its alarm is set.
        let watchdog = DispatchWorkItem { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 220, execute: watchdog)
        defer { watchdog.cancel() }
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(text)")
    }

    /// Tests/webview/replay_test.py: replay, compose and compare (issue 34) end to end: a recording origin sees the
    /// replay's head and body as the original's (hop-by-hop fields aside) and an edited replay's edit, through
    /// `atsproxy replay`, `POST /api/replay` and headless Chromium (Replay, Edit and replay, Compare, Compose).
    @Test("Replay, compose and compare: the CLI, the API and a real browser against a recording origin",
          .timeLimit(.minutes(4)))
    func replayEndToEnd() throws {
        let root = TestPython.packageRoot
        let artifacts = root.appendingPathComponent(".build/test-artefacts/webview").path
        let p = Process()
        p.executableURL = URL(fileURLWithPath: try TestPython.path())
        p.arguments = [root.appendingPathComponent("Tests/webview/replay_test.py").path,
                       "--atsproxy", RunCLITests.binary, "--artifacts", artifacts]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = out
        try p.run()
        // The script bounds itself (180 s); this is the backstop should it hang before its alarm is set.
        let watchdog = DispatchWorkItem { if p.isRunning { kill(p.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 220, execute: watchdog)
        defer { watchdog.cancel() }
        let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        #expect(p.terminationStatus == 0, "\(text)")
    }
}
