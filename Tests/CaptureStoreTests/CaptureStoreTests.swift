import ATSPolicy
import Foundation
import GRDB
import HTTP1Core
import ProxyTrace
import Synchronization
import Testing
import TestSupport

@testable import CaptureStore

/// A folder of its own for one test, under the system's temporary directory.
private func folder() throws -> URL {
    try TestScratch.folder("capture")
}

private let run = CaptureRunInfo(
    started: 1_700_000_000, atsproxyVersion: "test", bodyLimit: 1024, settings: ["ats": "enforce", "ios": "26"])

/// An intercepted HTTPS exchange that ATS blocked over HTTP (`--block http`), with every part of the record set.
private func blockedExchange(connection: UInt64 = 7) -> ExchangeSummary {
    var e = ExchangeSummary(
        method: "POST", url: "https://Old.Example:8443/login?x=1", status: 403, httpVersion: "HTTP/1.1",
        outcome: .blocked, errors: [ExchangeError(urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836))],
        requestBytes: 2000, responseBytes: 120, durationMilliseconds: 12.5, note: "blocked by the proxy")
    let violation = ATSViolation(
        kind: .tlsVersionTooLow, urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836),
        explanation: "TLS 1.0 is below the required TLS 1.2",
        fix: .setKeys(domain: "old.example", keys: [FixKey(key: "NSExceptionMinimumTLSVersion", value: .string("TLSv1.0"))]))
    e.connection = ConnectionRecord(
        connectionID: connection, clientAddress: "127.0.0.1:50000", upstreamAddress: "203.0.113.5:8443",
        clientTLS: TLSLegFacts(version: "TLSv1.3", cipherSuite: "TLS_AES_128_GCM_SHA256", alpn: "http/1.1",
                               serverName: "old.example", resumed: false),
        upstreamTLS: TLSLegFacts(version: "TLSv1.0", cipherSuite: "ECDHE-RSA-AES128-SHA", alpn: nil,
                                 serverName: "old.example", resumed: true),
        decision: PolicyDecision(keyPath: ["NSExceptionDomains", "old.example"], reason: "exact match", notes: ["n"]),
        violations: [violation])
    e.action = .blockedAnswer
    e.detail = ExchangeDetail(
        request: HTTPRequestHead(
            method: "POST", target: "/login?x=1", headers: [("Host", "old.example:8443"), ("X-A", "1"), ("X-A", "2")]),
        forwardedRequest: nil, response: nil,
        clientResponse: HTTPResponseHead(status: 403, reason: "Forbidden", headers: [("X-ATS-Error", "-1200")]),
        timings: ExchangeTimings(started: 1_700_000_001, requestSent: nil, firstResponseByte: nil, ended: 1_700_000_001.0125),
        requestBody: CapturedBody(bytes: Array(repeating: 0x41, count: 1024), totalBytes: 2000),
        responseBody: CapturedBody(bytes: [], totalBytes: 0))
    return e
}

private func trace(_ title: String, connection: UInt64 = 7, time: Double = 1_700_000_002) -> CaptureItem {
    var record = DiagnosticsRecord(
        title: title, subject: "request GET <x>", fields: [.init("Connection ID", "7"), .init("Headers", "a: \"b\"\n\tc")])
    record.connectionID = connection
    return .trace(record, time: time)
}

private func bytes(_ url: URL) throws -> Data { try Data(contentsOf: url) }

/// Another connection to the capture (as `sqlite3 FILE` would be) takes its write lock on a thread of its own and
/// holds it for `seconds`; returns once the lock is held, with a semaphore signalled when it is released.
/// Holds the capture's write lock from another connection for `seconds`, counted from `go`'s signal when given (so
/// a test thread the machine's load delays between taking the lock and writing still meets it held).
private func holdWriteLock(_ path: String, seconds: Double, after go: DispatchSemaphore? = nil) throws
    -> DispatchSemaphore
{
    let other = try DatabaseQueue(path: path)
    let locked = DispatchSemaphore(value: 0)
    let released = DispatchSemaphore(value: 0)
    Thread {
        do {
            try other.writeWithoutTransaction { db in
                try db.execute(sql: "BEGIN IMMEDIATE")
                locked.signal()
                go?.wait()
                usleep(useconds_t(seconds * 1_000_000))
                try db.execute(sql: "COMMIT")
            }
        } catch {
            Issue.record("the other connection: \(error)")
            locked.signal()
        }
        released.signal()
    }.start()
    locked.wait()
    return released
}

@Suite("Capture store")
struct CaptureStoreTests {
    @Test("An exchange record comes back whole: heads in order, codes, decision, violations with fixes, TLS, bodies, trace")
    func roundTrip() throws {
        let path = try folder().appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: run)
        try writer.write([.exchange(blockedExchange()), trace("ATS Decision"), trace("Did Finish")])
        try writer.close(ended: 1_700_000_010)

        let reader = try CaptureReader(path: path)
        #expect(try reader.runs().map(\.settings) == [run.settings])
        #expect(try reader.runs().first?.ended == 1_700_000_010)
        let listed = try reader.exchanges()
        #expect(listed.count == 1)
        let got = try #require(try reader.exchange(id: listed[0].id))
        let want = blockedExchange()
        #expect(got.record == want)
        #expect(got.record.errors == want.errors)
        let connection = try #require(got.record.connection)
        #expect(connection.connectionID == 7)
        #expect(connection.clientAddress == "127.0.0.1:50000")
        #expect(connection.upstreamAddress == "203.0.113.5:8443")
        #expect(connection.clientTLS == want.connection?.clientTLS)
        #expect(connection.upstreamTLS == want.connection?.upstreamTLS)
        #expect(connection.decision == want.connection?.decision)
        #expect(connection.violations == want.connection?.violations)
        let detail = try #require(got.record.detail)
        #expect(detail.request == want.detail?.request)
        #expect(detail.clientResponse == want.detail?.clientResponse)
        #expect(detail.response == nil)
        #expect(detail.timings == want.detail?.timings)
        #expect(detail.requestBody == CapturedBody(bytes: Array(repeating: 0x41, count: 1024), totalBytes: 2000))
        #expect(detail.requestBody?.isTruncated == true)
        #expect(detail.responseBody == CapturedBody(bytes: [], totalBytes: 0))
        let records = try reader.traceRecords(runID: got.runID, connectionID: 7)
        #expect(records.map(\.record.title) == ["ATS Decision", "Did Finish"])
        #expect(records[0].record.fields == [.init("Connection ID", "7"), .init("Headers", "a: \"b\"\n\tc")])
    }

    @Test("An exchange whose own trace records were left to the reader gets them back, rebuilt from its row, in time order")
    func rebuiltTrace() throws {
        let path = try folder().appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: run)
        var relayed = ExchangeSummary(
            method: "GET", url: "https://good.test/a", status: 200, httpVersion: "HTTP/2.0", outcome: .allowed,
            errors: [], requestBytes: 0, responseBytes: 1024, durationMilliseconds: 2.5)
        var connection = try #require(blockedExchange().connection)
        connection.upstreamTLS?.alpn = "h2"
        relayed.connection = connection
        relayed.action = .relayed
        var detail = ExchangeDetail(
            request: HTTPRequestHead(method: "GET", target: "/a", headers: [("Host", "good.test")]),
            response: HTTPResponseHead(status: 200, reason: "OK", headers: []),
            timings: ExchangeTimings(
                started: 1_700_000_003, requestSent: 1_700_000_003.001, firstResponseByte: 1_700_000_003.002,
                ended: 1_700_000_003.0025))
        detail.rebuiltTrace = [.requestStart, .finish]
        relayed.detail = detail
        // The connection's own records are stored: one before the exchange, one after it.
        try writer.write([trace("ATS Decision"), .exchange(relayed), trace("TCP Connection Closed", time: 1_700_000_004)])
        try writer.write([.exchange(blockedExchange())])
        try writer.close(ended: 1_700_000_010)

        let reader = try CaptureReader(path: path)
        let stored = try #require(try reader.exchanges(matching: CaptureFilter(outcome: .allowed)).first)
        #expect(stored.record.detail?.rebuiltTrace == [.requestStart, .finish])
        let blocked = try #require(try reader.exchanges(matching: CaptureFilter(outcome: .blocked)).first)
        #expect(blocked.record.detail?.rebuiltTrace == [])
        #expect(CaptureReader.rebuiltTraceRecords(of: blocked).isEmpty)

        let made: [DiagnosticsRecord] = [
            .loaderWhatToDo(method: "GET", url: "https://good.test/a"),
            .protocolEnqueue(method: "GET", url: "https://good.test/a", httpVersion: "HTTP/2.0", headers: nil),
            .protocolReceived(method: "GET", url: "https://good.test/a", httpVersion: "HTTP/2.0", status: 200),
            .didFinish(totalMilliseconds: 2.5, totalBytes: 1024),
        ]
        let want = made.map { record -> DiagnosticsRecord in
            var record = record
            record.connectionID = 7
            return record
        }
        let records = try reader.traceRecords(runID: stored.runID, connectionID: 7)
        #expect(records.map(\.record.title)
            == ["ATS Decision", "LoaderWhatToDo", "Protocol Enqueue", "Protocol Received", "Did Finish",
                "TCP Connection Closed"])
        #expect(Array(records[1...4].map(\.record)) == want)
        #expect(records[1...4].map(\.time) == [1_700_000_003, 1_700_000_003, 1_700_000_003.002, 1_700_000_003.0025])
        // One exchange's window (the web view's detail): its own rebuilt records, and the opening ones.
        let window = try reader.traceRecords(
            runID: stored.runID, connectionID: 7, opening: 0, from: 1_700_000_002.9, to: 1_700_000_003.1,
            exchangeID: stored.id)
        #expect(window.map(\.record) == want)
    }

    @Test("Listings are newest first and filter by host, domain, verdict, status, method and URL text")
    func filters() throws {
        let path = try folder().appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: run)
        var items: [CaptureItem] = []
        for i in 0..<30 {
            var e = ExchangeSummary(
                method: i % 3 == 0 ? "POST" : "GET", url: "https://h\(i % 5).example.com/p\(i)_%",
                status: i % 2 == 0 ? 200 : 503, httpVersion: "HTTP/1.1", outcome: i == 29 ? .blocked : .allowed,
                errors: [], requestBytes: 0, responseBytes: 0, durationMilliseconds: 1)
            e.detail = ExchangeDetail(timings: ExchangeTimings(started: Double(i), ended: Double(i) + 0.5))
            items.append(.exchange(e))
        }
        try writer.write(items)
        try writer.close(ended: 100)
        let reader = try CaptureReader(path: path)
        func urls(_ filter: CaptureFilter, limit: Int = 100) throws -> [String] {
            try reader.exchanges(matching: filter, limit: limit).map(\.record.url)
        }
        #expect(try urls(CaptureFilter(), limit: 2) == ["https://h4.example.com/p29_%", "https://h3.example.com/p28_%"])
        #expect(try urls(CaptureFilter(host: "H1.example.com")).count == 6)
        #expect(try urls(CaptureFilter(host: ".example.com")).count == 30)
        #expect(try urls(CaptureFilter(outcome: .blocked)) == ["https://h4.example.com/p29_%"])
        #expect(try urls(CaptureFilter(status: 500...599)).count == 15)
        #expect(try urls(CaptureFilter(method: "POST")).count == 10)
        // LIKE's wildcards in the text are literal.
        #expect(try urls(CaptureFilter(text: "p2_")) == ["https://h2.example.com/p2_%"])
        let first = try reader.exchanges(limit: 10)
        let next = try reader.exchanges(limit: 10, before: first.last?.id)
        #expect(next.first?.record.url == "https://h4.example.com/p19_%")
        #expect(try reader.count(matching: CaptureFilter(host: "h0.example.com", status: 200...200)) == 3)
    }

    @Test("The schema: tables, query indexes, the capture's application id; WAL while writing, one file after close")
    func schema() throws {
        let path = try folder().appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: run)
        try writer.write([trace("ATS Decision"), trace("Did Finish"), .exchange(blockedExchange())])
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        try writer.close(ended: 2)
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600, "bodies may hold secrets")
        let db = try DatabaseQueue(path: path, configuration: { var c = Configuration(); c.readonly = true; return c }())
        try db.read { db in
            #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode") == "delete")
            #expect(try Int32.fetchOne(db, sql: "PRAGMA application_id") == CaptureSchema.applicationID)
            let tables = try Set(String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'"))
            #expect(tables.isSuperset(of: ["runs", "connections", "exchanges", "exchange_bodies", "decisions",
                                           "handshakes", "trace_chunks"]))
            // Every index costs each exchange an entry: the host's, and the problems' for the few that are.
            let indexes = try Set(String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'"))
            #expect(indexes == ["exchanges_by_host", "exchanges_problems", "trace_chunks_by_connection"])
            // The filter's problems condition is the partial index's, word for word (the schema states it on its own).
            let problemsIndex = try String.fetchOne(
                db, sql: "SELECT sql FROM sqlite_master WHERE name = 'exchanges_problems'") ?? ""
            #expect(problemsIndex.hasSuffix("WHERE " + CaptureCondition.problemsSQL), "\(problemsIndex)")
            // The exchanges table has a column per field of a frame, and the writer's references.
            let columns = try Row.fetchAll(db, sql: "PRAGMA table_info(exchanges)").map { $0["name"] as String }
            #expect(columns == ["id", "run_id", "decision_id", "handshake_id"] + ExchangeField.names)
            #expect(CaptureBatch.exchangeColumns == ExchangeField.names.count)
            // Bodies are keyed by exchange id (no index of their own).
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM exchange_bodies") == 1)
            // Problem verdicts, statuses of 400 and more, and `problems` read the partial index of problems.
            for filter in ["verdict:blocked", "status:4xx", "status:503", "problems", "host:a.test verdict:failed"] {
                var sql = CaptureFilter.SQL()
                try CaptureFilter(parsing: filter).compile(into: &sql)
                let plan = try Row.fetchAll(
                    db, sql: "EXPLAIN QUERY PLAN SELECT e.id FROM exchanges e WHERE "
                        + sql.conditions.joined(separator: " AND ") + " ORDER BY e.id DESC LIMIT 50",
                    arguments: sql.arguments)
                let uses = plan.map { $0["detail"] as String }.joined(separator: "; ")
                #expect(uses.contains("exchanges_problems") || uses.contains("exchanges_by_host"), "\(filter): \(uses)")
            }
            // A keep-alive exchange costs one exchange row, one body row and one trace chunk, not a row per record.
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM trace_chunks") == 1)
            // The live view's query reads the index, not the table.
            let plan = try Row.fetchAll(
                db, sql: "EXPLAIN QUERY PLAN SELECT * FROM exchanges WHERE host = 'x' ORDER BY id DESC LIMIT 50")
            #expect(plan.contains { ($0["detail"] as String).contains("exchanges_by_host") })
        }
    }

    @Test("A capture of a pre-release build is refused by reader and writer, named as such, and left as it was")
    func preReleaseCaptureIsRefused() throws {
        let path = try folder().appendingPathComponent("dev.atscap").path
        // As the development builds made it: their migration steps recorded, their tables.
        let old = try DatabaseQueue(path: path)
        try old.write { db in
            try db.execute(sql: """
                PRAGMA application_id = \(CaptureSchema.applicationID);
                CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
                INSERT INTO grdb_migrations VALUES ('1 tables'), ('2 query indexes'), ('3 upstream address');
                CREATE TABLE runs (id INTEGER PRIMARY KEY, started REAL NOT NULL, ended REAL,
                    atsproxy_version TEXT NOT NULL, body_limit INTEGER NOT NULL, settings TEXT NOT NULL);
                CREATE TABLE trace_records (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL);
                INSERT INTO runs (started, ended, atsproxy_version, body_limit, settings) VALUES (1, 2, 'dev', 0, '[]');
                """)
        }
        try old.close()
        let before = try #require(FileManager.default.contents(atPath: path))
        let expected = CaptureFileError(path: path, problem: .preRelease)
        #expect(throws: expected) { try CaptureReader(path: path) }
        #expect(throws: expected) { try CaptureWriter.open(path: path, run: run) }
        #expect(expected.description.contains("\(path): written by a pre-release build of atsproxy"))
        #expect(FileManager.default.contents(atPath: path) == before)
        for suffix in ["-wal", "-shm", "-journal"] { #expect(!FileManager.default.fileExists(atPath: path + suffix)) }
    }

    @Test("Trace records come back per connection in the order they were made, across batches")
    func traceOrder() throws {
        let path = try folder().appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: run)
        // Two connections interleaved over two batches, and a record of no connection at all.
        var unfiled = DiagnosticsRecord(title: "Unfiled")
        unfiled.connectionID = nil
        try writer.write([
            trace("TCP Connection Start", connection: 7), trace("TCP Connection Start", connection: 8),
            trace("Protocol Enqueue 1", connection: 7), .exchange(blockedExchange(connection: 7)),
            trace("Protocol Enqueue 2", connection: 8), trace("Protocol Enqueue 3", connection: 7),
            .trace(unfiled, time: 5),
        ])
        try writer.write([
            .exchange(blockedExchange(connection: 8)), trace("Did Finish 3", connection: 7),
            .exchange(blockedExchange(connection: 7)), trace("After", connection: 7),
        ])
        try writer.close(ended: 9)
        let reader = try CaptureReader(path: path)
        let seven = try reader.traceRecords(runID: 1, connectionID: 7)
        #expect(seven.map(\.record.title)
            == ["TCP Connection Start", "Protocol Enqueue 1", "Protocol Enqueue 3", "Did Finish 3", "After"])
        #expect(seven.map(\.id) == seven.map(\.id).sorted())
        #expect(seven.allSatisfy { $0.record.connectionID == 7 && $0.time == 1_700_000_002 })
        #expect(try reader.traceRecords(runID: 1, connectionID: 8).map(\.record.title)
            == ["TCP Connection Start", "Protocol Enqueue 2"])
        // A row per connection per batch.
        let db = try DatabaseQueue(path: path, configuration: { var c = Configuration(); c.readonly = true; return c }())
        let chunks = try db.read { db in
            try Row.fetchAll(db, sql: "SELECT records FROM trace_chunks WHERE connection_id = 7 ORDER BY id")
                .map { try TraceChunk.decode($0["records"]).map(\.record.title) }
        }
        #expect(chunks == [["TCP Connection Start", "Protocol Enqueue 1", "Protocol Enqueue 3"], ["Did Finish 3", "After"]])
        #expect(try db.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM trace_chunks WHERE connection_id IS NULL") } == 1)
    }

    @Test("One exchange's trace (the web view's detail): the connection's opening records and those of its time window")
    func traceWindow() throws {
        let path = try folder().appendingPathComponent("w.atscap").path
        let writer = try CaptureWriter.open(path: path, run: run)
        // A keep-alive connection: its opening, then three exchanges a batch each, at 10, 20 and 30 s.
        try writer.write([trace("TCP Connection Start", time: 1), trace("ATS Decision", time: 1)])
        for t in [10.0, 20, 30] {
            try writer.write([trace("Protocol Enqueue \(Int(t))", time: t), trace("Did Finish \(Int(t))", time: t + 1)])
        }
        try writer.close(ended: 40)
        let reader = try CaptureReader(path: path)
        let second = try reader.traceRecords(runID: 1, connectionID: 7, opening: 2, from: 19, to: 22)
        #expect(second.map(\.record.title) == ["TCP Connection Start", "ATS Decision", "Protocol Enqueue 20", "Did Finish 20"])
        let capped = try reader.traceRecords(runID: 1, connectionID: 7, opening: 2, from: 0, to: 100, limit: 3)
        #expect(capped.map(\.record.title) == ["TCP Connection Start", "ATS Decision", "Protocol Enqueue 10"])
    }

    @Test("Trace chunks keep any text (quotes, backslashes, control characters, non-ASCII) and each field's level")
    func traceChunkText() throws {
        let record = DiagnosticsRecord(
            title: "T \"q\" \\ é", subject: "a\u{1}b\u{1f}",
            fields: [.init("k\n", "v\r\t"), .init("", ""), .init("Received", "a: b", level: 2)], level: 3)
        var bytes: [UInt8] = []
        TraceChunk.append(record, time: 1_700_000_000.125, to: &bytes)
        TraceChunk.append(DiagnosticsRecord(title: "second"), time: 2, to: &bytes)
        TraceChunk.close(&bytes)
        let decoded = try TraceChunk.decode(String(decoding: bytes, as: UTF8.self))
        #expect(decoded.map(\.record) == [record, DiagnosticsRecord(title: "second")])
        #expect(decoded.map(\.time) == [1_700_000_000.125, 2])
        #expect(throws: TraceChunk.Malformed.self) { try TraceChunk.decode("[[1, 2]]") }
        #expect(throws: TraceChunk.Malformed.self) { try TraceChunk.decode(#"[[1, 1, "t", "s", ["k", "v"], [1, 2]]]"#) }
    }

    @Test("A file that is not SQLite, a SQLite file of another program, and a newer capture are refused untouched")
    func refusedFiles() throws {
        let dir = try folder()
        let text = dir.appendingPathComponent("notes.atscap")
        try Data("{\"log\": {\"version\": \"1.2\"}}\n".utf8).write(to: text)
        let other = dir.appendingPathComponent("other.sqlite")
        let otherDB = try DatabaseQueue(path: other.path)
        try otherDB.write { try $0.execute(sql: "CREATE TABLE t (x); INSERT INTO t VALUES (1)") }
        try otherDB.close()
        let newer = dir.appendingPathComponent("newer.atscap")
        let writer = try CaptureWriter.open(path: newer.path, run: run)
        try writer.close(ended: 1)
        let newerDB = try DatabaseQueue(path: newer.path)
        try newerDB.write { try $0.execute(sql: "INSERT INTO grdb_migrations VALUES ('3 from the future')") }
        try newerDB.close()

        let cases: [(URL, CaptureFileError.Problem)] = [
            (text, .notSQLite), (other, .notACapture), (newer, .newerVersion(unknownSteps: ["3 from the future"])),
        ]
        for (url, problem) in cases {
            let before = try bytes(url)
            #expect(throws: CaptureFileError(path: url.path, problem: problem)) { try CaptureReader(path: url.path) }
            #expect(throws: CaptureFileError(path: url.path, problem: problem)) {
                try CaptureWriter.open(path: url.path, run: run)
            }
            #expect(try bytes(url) == before, "\(url.lastPathComponent) was modified")
            #expect(!FileManager.default.fileExists(atPath: url.path + "-wal"))
            #expect(CaptureFileError(path: url.path, problem: problem).description.hasPrefix(url.path + ": "))
        }
        #expect(throws: CaptureFileError(path: dir.path, problem: .isDirectory)) { try CaptureReader(path: dir.path) }
        let missing = dir.appendingPathComponent("none.atscap").path
        #expect(throws: CaptureFileError(path: missing, problem: .missing)) { try CaptureReader(path: missing) }
    }

    @Test("A corrupt capture is named as corrupt and left as it is")
    func corruptFile() throws {
        let url = try folder().appendingPathComponent("c.atscap")
        let writer = try CaptureWriter.open(path: url.path, run: run)
        try writer.write((0..<200).map { _ in CaptureItem.exchange(blockedExchange()) })
        try writer.close(ended: 1)
        // Page 1's b-tree (the schema) and the pages after it overwritten; the SQLite header stays.
        var data = try bytes(url)
        for i in 100..<min(data.count, 3 * 4096) { data[i] = UInt8(truncatingIfNeeded: i &* 131) }
        try data.write(to: url)

        var problem: CaptureFileError.Problem?
        do {
            let reader = try CaptureReader(path: url.path)
            _ = try reader.exchanges()
        } catch {
            problem = error.problem
        }
        guard case .corrupt = problem else {
            Issue.record("reading a corrupt capture gave \(String(describing: problem))")
            return
        }
        do {
            _ = try CaptureWriter.open(path: url.path, run: run)
            Issue.record("the writer opened a corrupt capture")
        } catch {
            guard case .corrupt = error.problem else {
                Issue.record("the writer said \(error)")
                return
            }
        }
        #expect(try bytes(url) == data)
    }

    @Test("A run ends cleanly while the capture is still read (a live view): its end is written, the log stays")
    func closeWhileRead() throws {
        let path = try folder().appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: run)
        try writer.write([.exchange(blockedExchange())])
        let reader = try CaptureReader(path: path)
        #expect(try reader.count() == 1)
        try writer.close(ended: 1_700_000_010)
        #expect(try reader.runs().first?.ended == 1_700_000_010)
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        try reader.close()
        #expect(try CaptureReader(path: path).count() == 1)
    }

    @Test("A read-only capture is read without being changed")
    func readOnlyFile() throws {
        let url = try folder().appendingPathComponent("c.atscap")
        let writer = try CaptureWriter.open(path: url.path, run: run)
        try writer.write([.exchange(blockedExchange())])
        try writer.close(ended: 1)
        try FileManager.default.setAttributes([.posixPermissions: 0o400], ofItemAtPath: url.path)
        let before = try bytes(url)
        let reader = try CaptureReader(path: url.path)
        #expect(try reader.count() == 1)
        #expect(try reader.exchange(id: 1)?.record.detail?.requestBody?.totalBytes == 2000)
        #expect(try bytes(url) == before)
        #expect(!FileManager.default.fileExists(atPath: url.path + "-wal"))
    }

    @Test("A second writer on a file another holds is refused, and the file is untouched; once closed, it may append")
    func oneWriterPerFile() throws {
        let path = try folder().appendingPathComponent("c.atscap").path
        let first = try CaptureWriter.open(path: path, run: run)
        try first.write([.exchange(blockedExchange())])
        #expect(throws: CaptureFileError(path: path, problem: .inUse)) { try CaptureWriter.open(path: path, run: run) }
        #expect("\(CaptureFileError(path: path, problem: .inUse))".contains("another atsproxy is writing this capture"))
        try first.write([.exchange(blockedExchange())])
        try first.close(ended: 2)
        let second = try CaptureWriter.open(path: path, run: run)
        try second.close(ended: 3)
        let reader = try CaptureReader(path: path)
        #expect(try reader.count() == 2)
        #expect(try reader.runs().count == 2)
    }

    @Test("Another program's write lock of a few hundred milliseconds is waited out: the batch is committed whole")
    func shortLockWaitedOut() throws {
        let path = try folder().appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: run)
        try writer.write([.exchange(blockedExchange())])
        let released = try holdWriteLock(path, seconds: 0.3)
        try writer.write((0..<50).map { _ in CaptureItem.exchange(blockedExchange()) })
        #expect(released.wait(timeout: .now() + 10) == .success)
        try writer.close(ended: 2)
        #expect(try CaptureReader(path: path).count() == 51)
    }

    @Test("A lock held past SQLite's busy timeout: the batch is tried again once it is free, said once, nothing lost")
    func longerLockRetried() throws {
        let path = try folder().appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(path: path, run: run)
        let notices = Mutex<[String]>([])
        writer.busyNotice = { text in notices.withLock { $0.append(text) } }
        try writer.write([.exchange(blockedExchange(connection: 1))])
        let go = DispatchSemaphore(value: 0)
        let released = try holdWriteLock(path, seconds: CaptureWriter.busyTimeout + 2, after: go)
        // The same connection again (its rows are remembered from the first batch) and a new one.
        go.signal()
        try writer.write([.exchange(blockedExchange(connection: 1)), .exchange(blockedExchange(connection: 2))])
        #expect(released.wait(timeout: .now() + 10) == .success)
        try writer.close(ended: 2)
        #expect(notices.withLock { $0.count } == 1)
        #expect(notices.withLock { $0.first?.contains("another program holds the capture's lock") } == true)
        let reader = try CaptureReader(path: path)
        #expect(try reader.count() == 3)
        for exchange in try reader.exchanges() {
            #expect(try reader.exchange(id: exchange.id)?.record.connection?.decision?.keyPath
                == ["NSExceptionDomains", "old.example"])
        }
    }

    @Test("A reader given an empty file says so plainly")
    func emptyFileRead() throws {
        let url = try folder().appendingPathComponent("empty.atscap")
        #expect(FileManager.default.createFile(atPath: url.path, contents: Data()))
        #expect(throws: CaptureFileError(path: url.path, problem: .empty)) { try CaptureReader(path: url.path) }
        #expect("\(CaptureFileError(path: url.path, problem: .empty))"
            == "\(url.path): an empty file, not a capture (nothing was ever written to it)")
    }

    @Test("A path in a missing folder is refused with the folder named")
    func missingFolder() throws {
        let path = try folder().appendingPathComponent("no/such/c.atscap").path
        #expect(throws: CaptureFileError(
            path: path, problem: .cannotOpen("the directory \((path as NSString).deletingLastPathComponent) does not exist"))
        ) { try CaptureWriter.open(path: path, run: run) }
    }

    @Test("A connection's record crosses to the writer once, and again when it changed: each exchange keeps its own decision")
    func connectionRecordsSentWhenChanged() throws {
        let url = try folder().appendingPathComponent("c.atscap")
        let writer = try CaptureWriter.open(path: url.path, run: run)
        let first = blockedExchange()
        var same = blockedExchange()
        same.url = "https://old.example:8443/again"
        // The same connection, later judged by another entry (a plain-HTTP connection's next host).
        var changed = blockedExchange()
        changed.connection?.decision = PolicyDecision(keyPath: [], reason: "ATS defaults", notes: [])
        changed.connection?.violations = []
        var encoder = CaptureEncoder()
        var batch = CaptureBatch()
        for exchange in [first, same, changed] { encoder.append(.exchange(exchange), to: &batch) }
        #expect(batch.connections.count == 2, "sent with the first exchange and when it changed, not with the second")
        try writer.write(batch)
        // Across batches: the writer remembers the connection's rows.
        batch.removeAll()
        encoder.append(.exchange(changed), to: &batch)
        #expect(batch.connections.isEmpty)
        try writer.write(batch)
        try writer.close(ended: 2)
        let reader = try CaptureReader(path: url.path)
        let decisions = try (1...4).map { try reader.exchange(id: Int64($0))?.record.connection?.decision?.reason }
        #expect(decisions == ["exact match", "exact match", "ATS defaults", "ATS defaults"])
        #expect(try reader.exchange(id: 2)?.record.connection?.violations.count == 1)
        #expect(try reader.exchange(id: 4)?.record.connection?.violations.isEmpty == true)
    }

    @Test("Past its limit the encoder forgets the connections it sent, and the writer forgets them with it")
    func encoderForgetsConnections() throws {
        let url = try folder().appendingPathComponent("c.atscap")
        let writer = try CaptureWriter.open(path: url.path, run: run)
        var encoder = CaptureEncoder()
        var batch = CaptureBatch()
        for connection in 0...UInt64(CaptureEncoder.connectionLimit) {
            encoder.append(.exchange(blockedExchange(connection: connection)), to: &batch)
        }
        // Connection 0 was forgotten: its record is sent again, and its exchange still refers to its decision.
        encoder.append(.exchange(blockedExchange(connection: 0)), to: &batch)
        #expect(batch.connections.count == CaptureEncoder.connectionLimit + 2)
        try writer.write(batch)
        try writer.close(ended: 2)
        let reader = try CaptureReader(path: url.path)
        let last = try #require(try reader.exchange(id: Int64(CaptureEncoder.connectionLimit) + 2))
        #expect(last.record.connection?.connectionID == 0)
        #expect(last.record.connection?.decision?.reason == "exact match")
    }

    @Test("Hosts are read from URLs and authorities", arguments: [
        ("https://A.Example:8443/x", "a.example"), ("http://u:p@h.test/p?q", "h.test"), ("example.com:443", "example.com"),
        ("https://[::1]:8080/", "::1"), ("http://h.test", "h.test"),
    ])
    func hosts(url: String, host: String) {
        #expect(CaptureWriter.host(of: url) == host)
    }
}
