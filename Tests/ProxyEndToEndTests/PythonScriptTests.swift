import Foundation
import TestSupport
import Testing

/// The programs in the test targets' `Scripts/` folders (`Tests/*/Scripts`) stay runnable alone: each Python script
/// compiles (the syntax check of `python3 -m py_compile`, without writing `__pycache__` into the checkout), prints its
/// usage for `-h`, and the shell script parses. Catches a script broken by an edit before an end-to-end suite fails in a confusing way.
@Suite("The end-to-end tests' scripts run and parse alone")
struct PythonScriptTests {
    /// Where the processes' output files go (never the checkout's `Scripts` folder).
    let scratch: URL

    init() throws {
        scratch = try TestScratch.folder("scripts")
    }

    /// Every Python script of every test target's `Scripts` folder.
    static func pythonScripts() throws -> [String] {
        let tests = TestPython.packageRoot.appendingPathComponent("Tests")
        return try FileManager.default.contentsOfDirectory(atPath: tests.path).sorted().flatMap { target in
            let folder = tests.appendingPathComponent(target).appendingPathComponent("Scripts")
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return [String]() }
            return names.filter { $0.hasSuffix(".py") }.sorted().map { folder.appendingPathComponent($0).path }
        }
    }

    @Test("Every Python script compiles under the python3 that runs it")
    func compiles() async throws {
        let scripts = try Self.pythonScripts()
        #expect(scripts.count >= 20, "\(scripts)")
        let check = "import sys\nfor p in sys.argv[1:]:\n    compile(open(p, encoding='utf-8').read(), p, 'exec')\n"
        let r = try await runProcess("/usr/bin/python3", ["-c", check] + scripts, in: scratch)
        #expect(r.status == 0, "\(r.stderr)")
    }

    @Test("Every Python script prints its usage for -h, and exits non-zero")
    func usage() async throws {
        for script in try Self.pythonScripts() {
            let r = try await runProcess(
                "/usr/bin/python3", [script, "-h"], in: scratch, timeout: .seconds(20))
            #expect(r.status != 0, "\(script)")
            #expect(r.stderr.hasPrefix("Usage: python3 \(URL(fileURLWithPath: script).lastPathComponent)"),
                    "\(script): \(r.stderr.prefix(300))")
        }
    }

    @Test("The PKI's shell script parses")
    func shellParses() async throws {
        let r = try await runProcess("/bin/sh", ["-n", pkiScript], in: scratch)
        #expect(r.status == 0, "\(r.stderr)")
    }
}
