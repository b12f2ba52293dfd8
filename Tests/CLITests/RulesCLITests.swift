import Foundation
import Testing

/// `atsproxy rules FILE --check` run as a user would.
struct RulesCLITests {
    func check(_ contents: String) throws -> (status: Int32, stdout: String, stderr: String) {
        let dir = try ScratchDirectory()
        try contents.write(to: dir.url.appendingPathComponent("rules.txt"), atomically: true, encoding: .utf8)
        let run = try runATSProxy(["rules", "rules.txt", "--check"], in: dir.url, limit: 60)
        return (run.status, String(decoding: run.stdout, as: UTF8.self), run.stderr)
    }

    @Test("A good file: one normalized line a rule, with its source and points; exit 0")
    func lists() throws {
        let run = try check(
            """
            # QA's rules
            [login] map-local |host:api.example.test method:post|^https://api\\.example\\.test/login$|mocks/login.json

              fault *.staging.example.test=EXPIRED
            modify-headers /Cache-Control/
            """)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(
            run.stdout == """
                rules.txt:2  [login] map-local |host:api.example.test method:POST|^https://api\\.example\\.test/login$|mocks/login.json  (request-head)
                rules.txt:4  fault *.staging.example.test=expired  (connection)
                rules.txt:5  modify-headers /Cache-Control/  (request-head, response-head)

                """)
    }

    @Test("A bad file: every error with file, line and column, no rules listed; exit 1")
    func errors() throws {
        let run = try check("throttle 3G\nmap-local /status:404/x/y\nfault *.test=expird\n")
        #expect(run.status == 1)
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains("rules.txt:2:12: status: is known only from the response point on"))
        #expect(run.stderr.contains("rules.txt:3:14: unknown fault kind \"expird\""))
        #expect(run.stderr.contains("2 errors; no rules loaded"))
    }

    @Test("A missing file: exit 2")
    func missing() throws {
        let run = try runATSProxy(["rules", "/nonexistent/rules.txt", "--check"], limit: 60)
        #expect(run.status == 2)
        #expect(run.stderr.contains("cannot read /nonexistent/rules.txt"))
    }
}
