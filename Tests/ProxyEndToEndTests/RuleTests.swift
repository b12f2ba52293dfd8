import Foundation
import TestSupport
import Testing

/// Issue 33 from the README's side: a rules file and options change real traffic between curl and a real origin.
@Suite("Rules change traffic: map local, header rules, answers, reloads")
struct RuleTests {
    /// A folder with `rules.txt` (the given lines) and `mocks/user.json`.
    private func rulesFolder(_ e2e: E2E, _ lines: [String]) throws -> (URL, String) {
        let folder = try e2e.folder()
        let mocks = folder.appendingPathComponent("mocks")
        try FileManager.default.createDirectory(at: mocks, withIntermediateDirectories: true)
        try Data("{\"user\":\"mock\"}\n".utf8).write(to: mocks.appendingPathComponent("user.json"))
        let rules = folder.appendingPathComponent("rules.txt").path
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: rules))
        return (folder, rules)
    }

    @Test("A rules file mocks an endpoint from a file, rewrites a header and answers 503; each line names its rule")
    func rulesFile() async throws {
        let e2e = try E2E.shared()
        let (folder, rules) = try rulesFolder(e2e, [
            "# the login mock, kept in git beside the app",
            "[mock-user] map-local |host:good.test|/v1/user$|mocks/user.json",
            "[debug] modify-headers |host:good.test|X-Debug|1",
            "[maintenance] answer |text:/health|503|Retry-After: 30|down",
        ])
        let origin = try await Origin(e2e, tls: "good", in: folder)
        let proxy = try await Proxy(e2e, origin.map("good.test") + ["--rules", rules], in: folder)
        let via = ["-x", proxy.url, "--cacert", e2e.proxyCA]

        let mocked = try await curl(via + ["https://good.test/v1/user"], in: folder)
        #expect(mocked.status == 200)
        #expect(mocked.bodyText == "{\"user\":\"mock\"}\n")
        #expect(mocked.header("Content-Type") == "application/json")
        #expect(mocked.header("X-Debug") == "1", "a header rule acts on a mocked response too")
        #expect(mocked.header("X-Body-SHA256") == nil, "the origin was not asked")

        let real = try await curl(via + ["https://good.test/bytes/10"], in: folder)
        #expect(real.status == 200)
        #expect(real.header("X-Body-SHA256") != nil, "the origin answered")
        #expect(real.header("X-Debug") == "1")

        let health = try await curl(via + ["https://good.test/health"], in: folder)
        #expect(health.status == 503)
        #expect(health.header("Retry-After") == "30")
        #expect(health.bodyText == "down")

        let lines = try await proxy.process.waitForOutput(timeout: .seconds(10)) { text in
            text.contains("/health 503") ? text : nil
        }
        #expect(lines.contains("RULE [mock-user] map-local: served "), "\(lines)")
        #expect(lines.contains("RULE [debug] modify-headers"), "\(lines)")
        #expect(lines.contains("RULE [maintenance] answer: answered 503"), "\(lines)")
    }

    @Test("Map local answers for a server that cannot be reached (an endpoint not deployed yet); other paths fail as the app would")
    func mockWithoutServer() async throws {
        let e2e = try E2E.shared()
        let (folder, rules) = try rulesFolder(e2e, ["map-local |/v1/user$|mocks/user.json"])
        // Port 9 on loopback: nothing listens, the connect is refused.
        let proxy = try await Proxy(e2e, ["--map", "new-api.test=127.0.0.1:9", "--rules", rules], in: folder)
        let via = ["-x", proxy.url, "--cacert", e2e.proxyCA]
        let mocked = try await curl(via + ["https://new-api.test/v1/user"], in: folder)
        #expect(mocked.status == 200)
        #expect(mocked.bodyText == "{\"user\":\"mock\"}\n")
        let head = try await curl(via + ["-I", "https://new-api.test/v1/user"], in: folder)
        #expect(head.header("Content-Length") == "16", "HEAD states the length a GET gets")
        let other = try await curl(via + ["https://new-api.test/v1/other"], in: folder)
        #expect(other.status == 502)
        #expect(other.header("X-ATS-Error") == "-1004 NSURLErrorCannotConnectToHost")
    }

    @Test("A rules file is reloaded when it changes; a bad edit keeps the previous rules and names its line")
    func reload() async throws {
        let e2e = try E2E.shared()
        let (folder, rules) = try rulesFolder(e2e, ["answer |text:/status|200|first"])
        let origin = try await Origin(e2e, tls: "good", in: folder)
        let proxy = try await Proxy(e2e, origin.map("good.test") + ["--rules", rules], in: folder)
        let via = ["-x", proxy.url, "--cacert", e2e.proxyCA]
        #expect(try await curl(via + ["https://good.test/status"], in: folder).bodyText == "first")

        try Data("answer |text:/status|200|first\nthrottle 5G\n".utf8).write(to: URL(fileURLWithPath: rules))
        let refused = try await proxy.process.waitForOutput(stderr: true, timeout: .seconds(15)) { text in
            text.contains("not reloaded") ? text : nil
        }
        #expect(refused.contains("rules.txt:2"), "\(refused)")
        #expect(try await curl(via + ["https://good.test/status"], in: folder).bodyText == "first")

        try Data("answer |text:/status|200|second\n".utf8).write(to: URL(fileURLWithPath: rules))
        _ = try await proxy.process.waitForOutput(stderr: true, timeout: .seconds(15)) { text in
            text.contains("reloaded, 1 rule in force") ? true : nil
        }
        #expect(try await curl(via + ["https://good.test/status"], in: folder).bodyText == "second")
    }

    @Test("Bad rules on the command line: every error with its option, and the proxy does not start")
    func badOptions() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let r = try await runProcess(
            e2e.binary,
            ["run", "--listen", "127.0.0.1:0", "--ca-dir", e2e.caDir.path, "--map-local", "|(|mocks",
             "--throttle", "5G", "--fault", "a.test=expird"],
            in: folder, timeout: .seconds(30))
        #expect(r.status != 0)
        let text = r.stdout + r.stderr
        #expect(text.contains("--map-local #1"), "\(text)")
        #expect(text.contains("--fault #1"), "\(text)")
        #expect(!text.contains("listening"), "\(text)")
    }
}
