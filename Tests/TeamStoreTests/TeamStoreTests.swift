import Foundation
import TestSupport
import Testing

@testable import CaptureStore

#if canImport(Glibc)
    import Glibc
#endif

/// The team store (`--capture postgresql://…`) against a real PostgreSQL 15 cluster that each test makes and stops
/// (`ThrowawayPostgres`), with real proxies, a local origin and a load client, all on 127.0.0.1.
@Suite(.serialized) struct TeamStoreTests {
    @Test("two proxies with labels write at once; show, har, report and the live view read the union")
    func twoProxiesWriteOneStore() throws {
        let pg = try ThrowawayPostgres()
        let folder = try TestScratch.folder("team")
        let origin = try OriginProcess(folder: folder)
        let a = try ProxyProcess(["--capture", pg.uri, "--run-label", "phone-a", "--capture-bodies", "4k"], folder: folder)
        let b = try ProxyProcess(["--capture", pg.uri, "--run-label", "phone-b", "--capture-bodies", "4k"], folder: folder)
        let results = Answers()
        let group = DispatchGroup()
        let originPort = origin.port
        for (proxyPort, tag) in [(a.port, "a"), (b.port, "b")] {
            group.enter()
            DispatchQueue.global().async {
                defer { group.leave() }
                do {
                    results.add(try drive(proxy: proxyPort, origin: originPort, count: 150, tag: tag).ok)
                } catch {
                    Issue.record("\(error)")
                }
            }
        }
        #expect(group.wait(timeout: .now() + 120) == .success)
        #expect(results.all == [150, 150])
        #expect(a.stop() == 0, "\(a.stderr)")
        #expect(b.stop() == 0, "\(b.stderr)")

        // Ids are unique across the proxies; every run ended and records where it ran.
        #expect(try pg.value("SELECT count(*), count(DISTINCT id) FROM exchanges") == "300|300")
        #expect(try pg.value("SELECT string_agg(label || ':' || (ended IS NOT NULL), ',' ORDER BY label) FROM runs")
                == "phone-a:true,phone-b:true")
        #expect(try pg.value("SELECT count(*) FROM runs WHERE host_name <> '' AND listen_address LIKE '127.0.0.1:%' "
                             + "AND policy = 'Apple''s defaults' AND ios_profile <> ''") == "2")
        #expect(try pg.value("SELECT count(*) FROM exchange_bodies WHERE id % 2 = 1") == "300")

        let show = try TeamStoreBinary.run(["show", pg.uri])
        #expect(show.status == 0, "\(show.stderrText)")
        #expect(show.stdoutText.split(separator: "\n").count == 300)
        let onlyA = try TeamStoreBinary.run(["show", pg.uri, "--label", "phone-a", "--filter", "text:/a/"])
        #expect(onlyA.stdoutText.split(separator: "\n").count == 150, "\(onlyA.stderrText)")
        let none = try TeamStoreBinary.run(["show", pg.uri, "--label", "phone-a", "--filter", "text:/b/"])
        #expect(none.status == 0 && none.stdoutText.isEmpty, "\(none.stdoutText)")

        let har = try TeamStoreBinary.run(["har", pg.uri])
        let document = try JSONSerialization.jsonObject(with: har.stdout) as? [String: Any]
        let entries = (document?["log"] as? [String: Any])?["entries"] as? [[String: Any]]
        #expect(entries?.count == 300)
        let bodies = entries?.compactMap { (($0["response"] as? [String: Any])?["content"] as? [String: Any])?["text"] as? String }
        #expect(bodies?.filter { $0.hasPrefix("hello /") }.count == 300)

        let report = try TeamStoreBinary.run(["report", pg.uri])
        #expect(report.status == 0, "\(report.stderrText)")
        #expect(report.stdoutText.contains("against 300 observed exchanges"), "\(report.stdoutText)")
        #expect(report.stdoutText.contains("(label phone-a, on ") && report.stdoutText.contains("(label phone-b, on "),
                "\(report.stdoutText)")
        let since = try TeamStoreBinary.run(["report", pg.uri, "--label", "phone-b", "--since", "1h"])
        #expect(since.stdoutText.contains("against 150 observed exchanges"), "\(since.stdoutText)")

        // One web view over both, following a third proxy's exchanges as they are committed (polling).
        let view = try PortProcess(
            TeamStoreBinary.path, ["view", pg.uri, "--web", "127.0.0.1:0"], folder: folder
        ) { line in
            line.hasPrefix("Web:     http://127.0.0.1:") ? Int(line.split(separator: ":").last?.prefix { $0.isNumber } ?? "") : nil
        }
        func viewed() throws -> Int {
            let answer = try runCommand(
                "/usr/bin/curl", ["-s", "http://127.0.0.1:\(view.port)/api/exchanges?limit=1000"], limit: 20)
            let json = try JSONSerialization.jsonObject(with: answer.stdout) as? [String: Any]
            return (json?["exchanges"] as? [Any])?.count ?? -1
        }
        #expect(try viewed() == 300)
        let c = try ProxyProcess(["--capture", pg.uri, "--run-label", "ci"], folder: folder)
        #expect(try drive(proxy: c.port, origin: origin.port, count: 20, tag: "c").ok == 20)
        #expect(try eventually(limit: 20) { try viewed() == 320 }, "the view did not follow: \(view.stderr)")
        #expect(c.stop() == 0)
        view.stop()
    }

    @Test("the database stopped mid-run and started again: the proxy never stalls, nothing within the bound is lost")
    func databaseOutage() throws {
        let pg = try ThrowawayPostgres()
        let folder = try TestScratch.folder("outage")
        let origin = try OriginProcess(folder: folder)
        let proxy = try ProxyProcess(["--capture", pg.uri, "--run-label", "outage"], folder: folder)
        #expect(try drive(proxy: proxy.port, origin: origin.port, count: 100, tag: "before").ok == 100)
        #expect(try eventually { try pg.value("SELECT count(*) FROM exchanges") == "100" })
        pg.stop()
        // While the database is down, every request is answered at once: none waits for the store.
        let during = try drive(proxy: proxy.port, origin: origin.port, count: 300, tag: "during")
        #expect(during.ok == 300)
        #expect(during.slowest < 2, "a request took \(during.slowest) s while the database was down")
        #expect(eventually(limit: 10) { proxy.stderr.contains("the database is unreachable") }, "\(proxy.stderr)")
        try pg.start()
        #expect(try drive(proxy: proxy.port, origin: origin.port, count: 50, tag: "after").ok == 50)
        #expect(try eventually(limit: 30) { try pg.value("SELECT count(*) FROM exchanges") == "450" },
                "\(proxy.stderr)")
        #expect(proxy.stop() == 0)
        let stderr = proxy.stderr
        #expect(stderr.components(separatedBy: "the database is unreachable").count == 2, "said once: \(stderr)")
        #expect(stderr.contains("none dropped"), "\(stderr)")
        // In order and whole: each phase's exchanges all there, with their connection rows.
        #expect(try pg.value("SELECT count(*) FROM exchanges WHERE url LIKE '%/during/%'") == "300")
        #expect(try pg.value(
            "SELECT count(*) FROM exchanges e LEFT JOIN connections c USING (run_id, connection_id) "
                + "WHERE c.connection_id IS NULL") == "0")
    }

    @Test("a proxy killed with SIGKILL: every committed exchange is there and reads back whole")
    func killedProxy() throws {
        let pg = try ThrowawayPostgres()
        let folder = try TestScratch.folder("kill")
        let origin = try OriginProcess(folder: folder)
        let proxy = try ProxyProcess(["--capture", pg.uri, "--capture-bodies", "4k"], folder: folder)
        let done = DispatchSemaphore(value: 0)
        let (proxyPort, originPort) = (proxy.port, origin.port)
        DispatchQueue.global().async {
            do { _ = try drive(proxy: proxyPort, origin: originPort, count: 2000, tag: "k") } catch {
                // The proxy is killed under the client: its failed requests are the point of the test.
            }
            done.signal()
        }
        #expect(try eventually { (Int(try pg.value("SELECT count(*) FROM exchanges")) ?? 0) >= 200 })
        proxy.stop(SIGKILL)
        #expect(done.wait(timeout: .now() + 60) == .success)
        let committed = try pg.value("SELECT count(*) FROM exchanges")
        #expect((Int(committed) ?? 0) >= 200)
        // No batch is half there: every exchange has its body, and the run is left open (never ended).
        #expect(try pg.value("SELECT count(*) FROM exchange_bodies WHERE id % 2 = 1") == committed)
        #expect(try pg.value("SELECT count(*) FROM runs WHERE ended IS NULL") == "1")
        let har = try TeamStoreBinary.run(["har", pg.uri])
        let document = try JSONSerialization.jsonObject(with: har.stdout) as? [String: Any]
        #expect(((document?["log"] as? [String: Any])?["entries"] as? [Any])?.count == Int(committed))
    }

    @Test("a store made by the first schema version is migrated by a proxy, and its rows still read")
    func migrationFromTheFirstVersion() throws {
        let pg = try ThrowawayPostgres()
        let connection = try PostgresConnection(PostgresLocation(pg.uri)!)
        try PostgresSchema.migrate(connection, version: "0.0.1", upTo: 1)
        // A run and an exchange as the first version wrote them.
        try connection.execute("""
            INSERT INTO runs (started, atsproxy_version, body_limit, settings, label, host_name, listen_address, policy,
                ios_profile) VALUES (1700000000, '0.0.1', 0, '[["ios","17"]]', 'old', 'lab', '127.0.0.1:8080', 'x', '17');
            INSERT INTO exchanges (id, run_id, started, ended, method, url, host, status, http_version, outcome,
                errors, request_bytes, response_bytes, duration_ms)
            VALUES (nextval('exchange_ids'), 1, 1700000001, 1700000002, 'GET', 'https://old.example/', 'old.example',
                200, 'HTTP/1.1', 'allowed', '', 0, 10, 1000);
            """)
        connection.close()
        #expect(try pg.value("SELECT string_agg(step, ',' ORDER BY step) FROM atsproxy_schema") == "1 tables")
        // Read before any proxy of this build migrated it: the columns later steps add read as NULL.
        let early = try TeamStoreBinary.run(["show", pg.uri, "--filter", "host:old.example"])
        #expect(early.stdoutText.contains("GET https://old.example/ 200"), "\(early.stdoutText) \(early.stderrText)")
        let folder = try TestScratch.folder("migrate")
        let proxy = try ProxyProcess(["--capture", pg.uri], folder: folder)
        #expect(proxy.stop() == 0, "\(proxy.stderr)")
        #expect(try pg.value("SELECT string_agg(step, ',' ORDER BY step) FROM atsproxy_schema") == "1 tables,2 indexes,3 applied rules,4 replay of")
        #expect(try pg.value("SELECT count(*) FROM pg_indexes WHERE indexname = 'exchanges_problems'") == "1")
        let show = try TeamStoreBinary.run(["show", pg.uri, "--filter", "host:old.example"])
        #expect(show.stdoutText.contains("GET https://old.example/ 200"), "\(show.stdoutText) \(show.stderrText)")

        // A newer version's step that older writers may ignore is ignored; one that breaks them is refused.
        _ = try pg.value("INSERT INTO atsproxy_schema VALUES ('9 future index', 0, '9.0', false) RETURNING step")
        let tolerated = try ProxyProcess(["--capture", pg.uri], folder: folder)
        #expect(tolerated.stop() == 0)
        _ = try pg.value("INSERT INTO atsproxy_schema VALUES ('10 new meaning', 0, '10.0', true) RETURNING step")
        let refused = try TeamStoreBinary.run(
            ["run", "--listen", "127.0.0.1:0", "--ca-dir", folder.appendingPathComponent("ca").path, "--capture", pg.uri])
        #expect(refused.status != 0)
        #expect(refused.stderrText.contains("10 new meaning") && refused.stderrText.contains("newer atsproxy"),
                "\(refused.stderrText)")
    }

    @Test("a capture file copied into the store and back is the same capture: har and filtered listings agree")
    func copyRoundTrip() throws {
        let pg = try ThrowawayPostgres()
        let folder = try TestScratch.folder("copy")
        let origin = try OriginProcess(folder: folder)
        let file = folder.appendingPathComponent("laptop.atscap").path
        let proxy = try ProxyProcess(["--capture", file, "--capture-bodies", "4k"], folder: folder)
        #expect(try drive(proxy: proxy.port, origin: origin.port, count: 60, tag: "laptop").ok == 60)
        #expect(proxy.stop() == 0)

        let up = try TeamStoreBinary.run(["capture", "copy", file, pg.uri])
        #expect(up.status == 0, "\(up.stderrText)")
        #expect(up.stderrText.contains("60 exchanges in 1 runs copied"), "\(up.stderrText)")
        let back = folder.appendingPathComponent("back.atscap").path
        let down = try TeamStoreBinary.run(["capture", "copy", pg.uri, back])
        #expect(down.status == 0, "\(down.stderrText)")
        // Quiet when piped: no progress drawn on a standard error that is not a terminal.
        #expect(!down.stderrText.contains("\r"))
        // On a terminal (script(1) gives it one), the same copy draws its progress.
        let onTerminal = try runCommand(
            "/usr/bin/script",
            ["-qec", "\(TeamStoreBinary.path) capture copy \(pg.uri) \(back).tty", "/dev/null"], limit: 60)
        #expect(onTerminal.stdoutText.contains("60 of 60 exchanges (100%)"), "\(onTerminal.stdoutText)")
        let again = try TeamStoreBinary.run(["capture", "copy", pg.uri, back])
        #expect(again.status == 2 && again.stderrText.contains("exists"))

        // The store renumbers (its ids are shared by every proxy): the rest of every entry is the same.
        let original = try normalizedHAR(TeamStoreBinary.run(["har", file]).stdout)
        let copied = try normalizedHAR(TeamStoreBinary.run(["har", back]).stdout)
        #expect(original.count == 60)
        #expect(original == copied)
        // One filter definition, two dialects: the store and the file list the same exchanges.
        for filter in ["text:LAPTOP/1", "status:2xx -text:/5", "host:127.0.0.1 method:GET", "problems", "not problems",
                       "code:-1200 or verdict:ok"] {
            let fromFile = try TeamStoreBinary.run(["show", file, "--filter", filter])
            let fromStore = try TeamStoreBinary.run(["show", pg.uri, "--filter", filter])
            #expect(fromStore.status == 0, "\(filter): \(fromStore.stderrText)")
            #expect(listing(fromFile.stdoutText) == listing(fromStore.stdoutText), "\(filter)")
        }
    }

    @Test("prune removes runs older than the age with everything that is theirs, and nothing else")
    func prune() throws {
        let pg = try ThrowawayPostgres()
        let folder = try TestScratch.folder("prune")
        let origin = try OriginProcess(folder: folder)
        for label in ["old", "new"] {
            let proxy = try ProxyProcess(["--capture", pg.uri, "--run-label", label, "--capture-bodies", "1k"],
                                         folder: folder)
            #expect(try drive(proxy: proxy.port, origin: origin.port, count: 20, tag: label).ok == 20)
            #expect(proxy.stop() == 0)
        }
        let kept = try TeamStoreBinary.run(["capture", "prune", pg.uri, "--older-than", "30d"])
        #expect(kept.stdoutText.contains("pruned 0 runs"), "\(kept.stdoutText) \(kept.stderrText)")
        _ = try pg.value("""
            UPDATE exchanges e SET ended = e.ended - 40 * 86400 FROM runs r WHERE r.id = e.run_id AND r.label = 'old';
            UPDATE runs SET started = started - 40 * 86400, ended = ended - 40 * 86400 WHERE label = 'old' RETURNING 1
            """)
        let pruned = try TeamStoreBinary.run(["capture", "prune", pg.uri, "--older-than", "30d"])
        #expect(pruned.stdoutText.contains("pruned 1 runs (20 exchanges)"), "\(pruned.stdoutText) \(pruned.stderrText)")
        #expect(try pg.value("SELECT string_agg(label, ',') FROM runs") == "new")
        #expect(try pg.value("SELECT count(*) FROM exchanges") == "20")
        #expect(try pg.value("SELECT count(*) FROM exchange_bodies") == "20")
        #expect(try pg.value("SELECT count(*) FROM trace_chunks t LEFT JOIN runs r ON r.id = t.run_id WHERE r.id IS NULL")
                == "0")
        #expect(try pg.value("SELECT count(*) FROM decisions d WHERE NOT EXISTS (SELECT 1 FROM exchanges e WHERE e.decision_id = d.id)") == "0")
    }

    @Test("the URI's password is never printed", arguments: [
        ("postgresql://lab:s3cret@127.0.0.1:1/atsproxy", "postgresql://lab:***@127.0.0.1:1/atsproxy"),
        ("postgres://lab:s3cret@db.example/atsproxy?sslmode=require&password=s3cret",
         "postgres://lab:***@db.example/atsproxy?sslmode=require&password=***"),
        ("postgresql://lab@db.example/atsproxy", "postgresql://lab@db.example/atsproxy"),
    ])
    func passwordRedacted(uri: String, shown: String) throws {
        #expect(PostgresLocation(uri)?.redacted == shown)
        // A store that cannot be reached: the error names it without the password.
        let folder = try TestScratch.folder("redact")
        let run = try TeamStoreBinary.run(
            ["run", "--listen", "127.0.0.1:0", "--ca-dir", folder.appendingPathComponent("ca").path, "--capture",
             uri.replacingOccurrences(of: "db.example", with: "127.0.0.1:1")], limit: 60)
        #expect(run.status != 0)
        #expect(!run.stderrText.contains("s3cret"), "\(run.stderrText)")
        #expect(run.stderrText.contains("cannot connect"), "\(run.stderrText)")
    }

    /// A HAR's entries without the store's ids (`_ats.id`, `_ats.run`), as comparable JSON text.
    private func normalizedHAR(_ data: Data) throws -> [String] {
        let document = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let entries = (document?["log"] as? [String: Any])?["entries"] as? [[String: Any]] ?? []
        return try entries.map { entry in
            var entry = entry
            if var ats = entry["_ats"] as? [String: Any] {
                ats["id"] = nil
                ats["run"] = nil
                entry["_ats"] = ats
            }
            return String(decoding: try JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys]), as: UTF8.self)
        }
    }

    /// A listing's lines without their ids.
    private func listing(_ text: String) -> [String] {
        text.split(separator: "\n").map { line in
            String(line.drop { $0 == " " }.drop { $0.isNumber })
        }
    }
}

/// Answers counted by concurrent load clients.
private final class Answers: @unchecked Sendable {
    // @unchecked: `values` only under `lock`.
    private let lock = NSLock()
    private var values: [Int] = []

    func add(_ value: Int) { lock.withLock { values.append(value) } }
    var all: [Int] { lock.withLock { values } }
}
