import CaptureStore
import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct CaptureCLITests {
    @Test(arguments: [
        (["--capture-bodies", "1m"], "--capture-bodies goes with --capture"),
        (["--capture", "x.atscap", "--capture-bodies", "12x"], "--capture-bodies"),
        (["--capture", "x.atscap", "--capture-bodies", "-1"], "--capture-bodies"),
    ])
    func badCaptureOptionsAreUsageErrors(args: [String], message: String) throws {
        let run = try RunCLITests.run(args)
        #expect(run.status == 64, "\(run.stderr)")
        #expect(run.stderr.contains(message), "\(run.stderr)")
        #expect(!run.stdout.contains("listening"))
    }

    @Test("--capture without a file name, before another option, writes captures/<date-time>.atscap in a 0700 folder")
    func bareCaptureUsesTheDefaultLocation() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("CaptureCLITests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer {
            do { try FileManager.default.removeItem(at: dir) } catch { Issue.record("cleanup of \(dir.path): \(error)") }
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: RunCLITests.binary)
        p.arguments = ["run", "--listen", "127.0.0.1:0", "--ca-dir", dir.appendingPathComponent("ca").path, "--capture",
                       "--capture-bodies", "64k"]
        p.currentDirectoryURL = dir
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        try p.run()
        let watchdog = DispatchWorkItem { if p.isRunning { p.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
        defer { watchdog.cancel() }
        var stdout = Data()
        while true {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            stdout.append(chunk)
            if String(decoding: stdout, as: UTF8.self).contains("Capture:") {
                kill(p.processIdentifier, SIGTERM)
                break
            }
        }
        p.waitUntilExit()
        let text = String(decoding: stdout, as: UTF8.self)
        #expect(p.terminationStatus == 0)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("Capture: ") }, "\(text)")
        #expect(line.contains("(bodies up to 65536 bytes each)"))
        let path = try #require(line.dropFirst("Capture: ".count).split(separator: " ").first.map(String.init))
        #expect(try Regex("^captures/[0-9]{8}-[0-9]{6}\\.atscap$").wholeMatch(in: path) != nil, "\(path)")
        let folder = try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("captures").path)
        #expect((folder[.posixPermissions] as? Int) == 0o700)
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent(path).path))
    }

    /// The last step of a start (the web view's listener) fails after the capture was opened and the proxy listens:
    /// the run's one cleanup path leaves nothing of it. An existing capture keeps only its earlier run, ended, in
    /// rollback-journal mode with no log beside it, so `view` (the last run's settings) shows that run, not the
    /// failed one; a capture the failed run made is removed.
    @Test("A start whose web view cannot listen leaves nothing of its run in the capture")
    func failedStartLeavesNothingOfItsRun() throws {
        let dir = try ScratchDirectory()
        let path = dir.path("kept.atscap")
        let first = try RunCLITests.run(["--capture", path, "--ats", "annotate"])
        #expect(first.status == 0 && first.stdout.contains("Capture: \(path)"), "\(first.stderr)")
        let holder = try RawTCPServer(.silent)
        let web = "127.0.0.1:\(holder.port)"
        let failed = try RunCLITests.run(["--capture", path, "--ats", "enforce", "--web", web])
        #expect(failed.status == 1, "\(failed.stdout)")
        #expect(failed.stderr.contains("atsproxy run: error: --web: cannot listen on \(web)"), "\(failed.stderr)")
        #expect(!failed.stdout.contains("listening"), "\(failed.stdout)")
        for suffix in ["-wal", "-shm", "-journal"] {
            #expect(!FileManager.default.fileExists(atPath: path + suffix), "\(suffix) left beside the capture")
        }
        // The file format's write and read versions (header bytes 18 and 19): 2 in WAL mode, 1 in rollback mode.
        let header = try #require(FileManager.default.contents(atPath: path))
        #expect(Array(header[18...19]) == [1, 1], "the capture was left in WAL mode")
        let runs = try CaptureReader(path: path).runs()
        #expect(runs.count == 1 && runs.allSatisfy { $0.ended != nil }, "\(runs)")
        #expect(runs.last?.settings["ats"] == "annotate", "view would show the failed run's settings: \(runs)")

        let made = dir.path("made.atscap")
        let failedNew = try RunCLITests.run(["--capture", made, "--web", web])
        #expect(failedNew.status == 1, "\(failedNew.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.url.path).sorted() == ["kept.atscap"])
    }
}
