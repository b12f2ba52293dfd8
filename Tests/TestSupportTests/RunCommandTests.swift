import Foundation
import TestSupport
import Testing

@Suite("runCommand, the tests' way to run a tool to its end")
struct RunCommandTests {
    @Test("stdout, stderr, the exit status and standard input, from a name found on PATH")
    func outputsAndStatus() throws {
        let run = try runCommand("sh", ["-c", "cat; echo warned >&2; exit 3"], input: Data("piped in\n".utf8))
        #expect(run.status == 3)
        #expect(run.stdoutText == "piped in\n")
        #expect(run.stderrText == "warned\n")
    }

    @Test("A child that fills its stderr pipe before writing stdout does not block")
    func fullStderr() throws {
        let run = try runCommand("/bin/sh", ["-c", "head -c 300000 /dev/zero >&2; echo done"], limit: 60)
        #expect(run.status == 0)
        #expect(run.stderr.count == 300_000)
        #expect(run.stdoutText == "done\n")
    }

    @Test("A hung child is killed after the limit")
    func limit() throws {
        let started = Date()
        let run = try runCommand("sleep", ["60"], limit: 0.5)
        #expect(run.status == SIGKILL)
        #expect(Date().timeIntervalSince(started) < 30)
    }
}
