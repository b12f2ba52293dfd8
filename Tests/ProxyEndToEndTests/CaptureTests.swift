import CaptureStore
import Foundation
import ProxyTrace
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Stops the proxy the way a user does (SIGINT), so it commits what is queued and closes its capture.
private func interrupt(_ proxy: Proxy) async throws {
    kill(proxy.process.pid, SIGINT)
    #expect(try await proxy.process.waitForExit() == 0)
}

/// The port of a proxy started by hand, from its banner.
private func bannerPort(_ process: TestProcess) async throws -> Int {
    try await process.waitForOutput { text -> Int? in
        guard let line = text.split(separator: "\n").first(where: { $0.contains("ATSProxy listening on 127.0.0.1:") }),
            let portText = line.split(separator: ":").last?.split(separator: " ").first
        else { return nil }
        return Int(portText)
    }
}

@Suite("Capture files (--capture)")
struct CaptureTests {
    @Test("curl through the proxy with --capture: exchanges, heads, bodies, TLS, decisions and trace records in the file")
    func endToEnd() async throws {
        let e2e = try E2E.shared()
        let files = try e2e.folder()
        let capture = files.appendingPathComponent("session.atscap").path
        let old = try await Origin(e2e, tls: "tls10", tls10: true, in: files)
        let stage = try await Stage(old.map("tls10.test") + ["--capture", capture, "--capture-bodies", "1k"])
        let small = try await stage.curl(["https://\(Stage.httpsHost)/bytes/300"])
        #expect(small.status == 200)
        let large = try await stage.curl(["https://\(Stage.httpsHost)/bytes/5000"])
        #expect(large.status == 200)
        let plain = try await stage.curl(["http://\(Stage.plainHost)/bytes/10"])
        #expect(plain.status == 200)
        let blocked = try await stage.curl(["https://tls10.test/"])
        #expect(blocked.exit == 35)
        _ = try await stage.proxy.process.waitForOutput { $0.contains("tls10.test") ? true : nil }
        try await interrupt(stage.proxy)
        // The trace went to the file, not to stderr: without --diagnostics the console is as without a capture.
        #expect(!stage.proxy.process.stderr.contains("CFNetwork Diagnostics"))
        #expect(stage.proxy.process.stdout.contains("Capture: \(capture)"))

        let reader = try CaptureReader(path: capture)
        let all = try reader.exchanges()
        #expect(all.count == 4, "\(all.map(\.record.url))")
        let smallRow = try #require(all.first { $0.record.url.hasSuffix("/bytes/300") })
        let one = try #require(try reader.exchange(id: smallRow.id))
        let detail = try #require(one.record.detail)
        #expect(detail.request?.method == "GET")
        #expect(detail.request?.headers.fields.contains { $0.name == "Host" && $0.value == Stage.httpsHost } == true)
        #expect(detail.response?.status == 200)
        #expect(detail.responseBody?.bytes.count == 300)
        #expect(detail.responseBody?.isTruncated == false)
        #expect(detail.timings.firstResponseByte != nil)
        let connection = try #require(one.record.connection)
        #expect(connection.upstreamTLS?.version != nil)
        #expect(connection.clientTLS?.serverName == Stage.httpsHost)
        #expect(connection.upstreamHandshake?.chain.isEmpty == false)
        #expect(connection.decision != nil)
        #expect(one.record.action == .relayed)
        let titles = try reader.traceRecords(runID: one.runID, connectionID: connection.connectionID).map(\.record.title)
        for title in ["TCP Connection Start", "TLS Handshake", "ATS Decision", "Protocol Enqueue", "Did Finish"] {
            #expect(titles.contains(title), "no \(title) record in \(titles)")
        }

        let largeRow = try #require(all.first { $0.record.url.hasSuffix("/bytes/5000") })
        let cut = try #require(try reader.exchange(id: largeRow.id)?.record.detail?.responseBody)
        #expect(cut.bytes.count == 1024 && cut.totalBytes == 5000 && cut.isTruncated)

        let block = try #require(try reader.exchanges(matching: CaptureFilter(outcome: .blocked)).first)
        #expect(block.record.url.contains("tls10.test"))
        #expect(block.record.action == .blockedHandshake)
        #expect(block.record.errors.first?.shortCode == "-1200/-9836")
        let violation = try #require(block.record.connection?.violations.first)
        #expect(violation.kind == .tlsVersionTooLow || violation.kind == .tlsVersionRefusedByOS)
        #expect(try reader.exchanges(matching: CaptureFilter(host: Stage.plainHost)).count == 1)
    }

    @Test("Without --diagnostics a capture rebuilds each exchange's own trace records from its row: the records --diagnostics 1 makes and prints for the same traffic")
    func rebuiltTrace() async throws {
        let e2e = try E2E.shared()
        let files = try e2e.folder()
        let own: Set<String> = ["LoaderWhatToDo", "Protocol Enqueue", "Protocol Received", "Did Finish"]
        // Per capture, per exchange (oldest first; one connection each): its connection's records as text, the
        // times of Did Finish and the origins' ports (Mapped To) left out: they differ from run to run.
        var traces: [String: [[String]]] = [:]
        for level in ["1", "0"] {
            let capture = files.appendingPathComponent("trace-\(level).atscap").path
            let old = try await Origin(e2e, tls: "tls10", tls10: true, in: files)
            let stage = try await Stage(old.map("tls10.test") + ["--capture", capture, "--diagnostics", level])
            #expect(try await stage.curl(["https://\(Stage.httpsHost)/bytes/300"]).status == 200)
            #expect(try await stage.curl(["--http2", "https://\(Stage.httpsHost)/bytes/20"]).status == 200)
            #expect(try await stage.curl(["-X", "POST", "-d", "x=1", "https://\(Stage.httpsHost)/echo"]).status == 200)
            #expect(try await stage.curl(["http://\(Stage.plainHost)/bytes/10"]).status == 200)
            #expect(try await stage.curl(["https://tls10.test/"]).exit == 35)
            _ = try await stage.proxy.process.waitForOutput { $0.contains("tls10.test") ? true : nil }
            try await interrupt(stage.proxy)

            let reader = try CaptureReader(path: capture)
            let all = try reader.exchanges(limit: 100).reversed()
            #expect(all.count == 5, "\(all.map(\.record.url))")
            var perExchange: [[String]] = []
            for exchange in all {
                let connection = try #require(exchange.record.connection)
                let trace = try reader.traceRecords(runID: exchange.runID, connectionID: connection.connectionID)
                perExchange.append(trace.map { r in
                    let fields = r.record.fields
                        .filter { (r.record.title != "Did Finish" || $0.key == "total bytes") && $0.key != "Mapped To" }
                        .map { "\($0.key)=\($0.value)" }
                    return "\(r.record.title) \(r.record.subject) \(fields.joined(separator: "; "))"
                })
                let one = try #require(try reader.exchange(id: exchange.id))
                if level == "1" {
                    // Stored as made: nothing to rebuild. The rebuild of the same row gives exactly the records the
                    // session made (the Did Finish times included), which the console printed.
                    #expect(one.record.detail?.rebuiltTrace == [])
                    var forced = one
                    let intercepted = exchange.record.url.hasPrefix("https://") && exchange.record.action == .relayed
                    guard intercepted || exchange.record.url.hasPrefix("http://") else { continue }
                    forced.record.detail?.rebuiltTrace = intercepted ? [.requestStart, .finish] : .finish
                    let rebuilt = CaptureReader.rebuiltTraceRecords(of: forced).map(\.record)
                    let stored = trace.map(\.record).filter {
                        own.contains($0.title) && (intercepted || $0.title == "Protocol Received" || $0.title == "Did Finish")
                    }
                    #expect(rebuilt == stored, "\(exchange.record.url)")
                    for record in rebuilt {
                        #expect(stage.proxy.process.stderr.contains(record.title), "\(record.title) not printed")
                    }
                } else if exchange.record.url.hasPrefix("https://good.test") {
                    #expect(one.record.detail?.rebuiltTrace == [.requestStart, .finish])
                }
            }
            traces[level] = perExchange
            if level == "0" { #expect(!stage.proxy.process.stderr.contains("CFNetwork Diagnostics")) }
        }
        // The trace read back is the same set of records either way (the rebuilt ones sorted in by time).
        let stored = try #require(traces["1"]), rebuilt = try #require(traces["0"])
        #expect(stored.count == rebuilt.count)
        for (a, b) in zip(stored, rebuilt) {
            #expect(a.sorted() == b.sorted())
        }
    }

    /// Sends 200 KB exchanges through the proxy `process` until it says its capture cannot be written (at most 40),
    /// then three more, which must still be proxied; stops it with SIGINT and checks it exited cleanly having said
    /// the failure once. Returns the exchange after which it said so.
    private func requestsUntilCaptureFails(_ process: TestProcess, _ e2e: E2E, in folder: URL) async throws -> Int? {
        let port = try await bannerPort(process)
        func get() async throws -> CurlResult {
            try await curl(
                ["-x", "http://127.0.0.1:\(port)", "--cacert", e2e.proxyCA, "https://good.test/bytes/200000"], in: folder)
        }
        var failedAfter: Int?
        for i in 1...40 {
            #expect(try await get().status == 200, "request \(i) through a proxy whose capture is full")
            if process.stderr.contains("cannot write the capture") {
                failedAfter = i
                break
            }
        }
        #expect(failedAfter != nil, "40 exchanges of 200 KB fitted? stderr: \(process.stderr)")
        for _ in 0..<3 { #expect(try await get().status == 200) }
        kill(process.pid, SIGINT)
        #expect(try await process.waitForExit() == 0, "\(process.stderr)")
        #expect(process.stderr.components(separatedBy: "cannot write the capture").count == 2, "\(process.stderr)")
        return failedAfter
    }

    // Both limits leave room for a new capture's schema (16 KiB pages: its tables and indexes, in the file and in
    // the write-ahead log) and a few exchanges, then fill up within the 40 exchanges of 200 KB the tests send.
    @Test("A capture that cannot grow (file size limit): said once, the proxy goes on, what was committed stays")
    func fileSizeLimit() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "good", in: folder)
        let capture = folder.appendingPathComponent("small.atscap").path
        // RLIMIT_FSIZE of 4 MiB, with SIGXFSZ ignored so that writes past it fail with EFBIG instead of killing.
        let process = try TestProcess(
            "/bin/bash",
            ["-c", "ulimit -f 4096 && trap '' XFSZ && exec \"$@\"", "limited", e2e.binary, "run", "--listen",
             "127.0.0.1:0", "--ca-dir", e2e.caDir.path, "--trust-ca", e2e.testCA, "--capture", capture]
                + origin.map("good.test"),
            in: folder, name: "atsproxy-fsize")
        let failedAfter = try await requestsUntilCaptureFails(process, e2e, in: folder)
        #expect(process.stderr.contains("\(capture): cannot write the capture"))
        let reader = try CaptureReader(path: capture)
        let kept = try reader.count()
        #expect(kept >= 1 && kept < (failedAfter ?? 0), "kept \(kept) of \(failedAfter ?? 0)")
    }

    @Test("A capture whose disk is full (a 2 MiB tmpfs): said once, the proxy goes on, what was committed stays")
    func diskFull() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "good", in: folder)
        let disk = folder.appendingPathComponent("disk")
        let saved = folder.appendingPathComponent("saved")
        for dir in [disk, saved] { try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true) }
        let capture = disk.appendingPathComponent("full.atscap").path
        // A private mount namespace with a small tmpfs for the capture. The shell forwards SIGINT to the proxy and,
        // once it has exited, copies the capture (and a write-ahead log, if one stayed) out of the namespace.
        let script = """
            mount -t tmpfs -o size=2m tmpfs "$1" || exit 97
            dir=$1; out=$2; shift 2
            "$@" & pid=$!
            trap 'kill -INT $pid' INT TERM
            wait $pid; wait $pid; rc=$?
            cp "$dir"/full.atscap* "$out"/
            exit $rc
            """
        let process = try TestProcess(
            "/usr/bin/unshare",
            ["-rm", "/bin/sh", "-c", script, "diskfull", disk.path, saved.path, e2e.binary, "run", "--listen",
             "127.0.0.1:0", "--ca-dir", e2e.caDir.path, "--trust-ca", e2e.testCA, "--capture", capture]
                + origin.map("good.test"),
            in: folder, name: "atsproxy-diskfull")
        let failedAfter = try await requestsUntilCaptureFails(process, e2e, in: folder)
        #expect(process.stderr.lowercased().contains("full"), "\(process.stderr)")
        let reader = try CaptureReader(path: saved.appendingPathComponent("full.atscap").path)
        let kept = try reader.count()
        #expect(kept >= 1 && kept < (failedAfter ?? 0), "kept \(kept) of \(failedAfter ?? 0)")
        for exchange in try reader.exchanges() {
            let body = try #require(try reader.exchange(id: exchange.id)?.record.detail?.responseBody)
            #expect(body.bytes.count == 200_000 && !body.isTruncated, "a committed exchange lost its body")
        }
    }

    @Test("A second proxy on a capture another is writing is refused at start; after a kill -9 of the first, it starts")
    func secondWriterRefused() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "good", in: folder)
        let capture = folder.appendingPathComponent("shared.atscap").path
        let first = try await Proxy(e2e, ["--capture", capture] + origin.map("good.test"), in: folder)
        #expect(try await curl(["-x", first.url, "--cacert", e2e.proxyCA, "https://good.test/bytes/10"], in: folder)
            .status == 200)
        let refused = try await runProcess(
            e2e.binary, ["run", "--listen", "127.0.0.1:0", "--ca-dir", e2e.caDir.path, "--capture", capture], in: folder,
            timeout: .seconds(30))
        #expect(refused.status == 1, "\(refused.stdout)\n\(refused.stderr)")
        #expect(refused.stderr.contains("--capture: \(capture): another atsproxy is writing this capture"), "\(refused.stderr)")
        #expect(!refused.stdout.contains("ATSProxy listening"))
        // A killed proxy leaves no stale lock: the next one appends its run.
        kill(first.process.pid, SIGKILL)
        _ = try await first.process.waitForExit()
        let second = try await Proxy(e2e, ["--capture", capture] + origin.map("good.test"), in: folder)
        #expect(try await curl(["-x", second.url, "--cacert", e2e.proxyCA, "https://good.test/bytes/20"], in: folder)
            .status == 200)
        try await interrupt(second)
        let reader = try CaptureReader(path: capture)
        #expect(try reader.runs().count == 2)
        #expect(try reader.count() == 2)
    }

    @Test("A 300 ms write lock held by sqlite3 again and again while traffic passes: every exchange is captured")
    func otherWritersLocksWaitedOut() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "good", in: folder)
        let capture = folder.appendingPathComponent("locked.atscap").path
        let proxy = try await Proxy(e2e, ["--capture", capture] + origin.map("good.test"), in: folder)
        #expect(try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://good.test/bytes/1"], in: folder)
            .status == 200)
        // Python's sqlite3 (the library any SQLite client uses) takes the write lock six times for 300 ms.
        let locker = try TestProcess(
            "/usr/bin/python3",
            [E2EScript.path("sqlite_locker.py"), capture],
            in: folder, name: "sqlite-locker")
        defer { locker.stop() }
        _ = try await locker.waitForOutput { $0.contains("locked") ? true : nil }
        let requests = 40
        for i in 0..<requests {
            let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://good.test/bytes/\(i)"], in: folder)
            #expect(r.status == 200)
        }
        _ = try await locker.waitForOutput(timeout: .seconds(30)) { $0.contains("done") ? true : nil }
        try await interrupt(proxy)
        #expect(!proxy.process.stderr.contains("no more exchanges are captured"), "\(proxy.process.stderr)")
        #expect(try CaptureReader(path: capture).count() == requests + 1)
    }

    @Test("A capture that cannot start on a full disk leaves no file behind; readers given an empty file say so")
    func failedStartLeavesNothing() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let disk = folder.appendingPathComponent("full")
        try FileManager.default.createDirectory(at: disk, withIntermediateDirectories: true)
        // A private mount namespace with a small tmpfs, filled before the proxy starts; then what is left in it.
        let script = """
            mount -t tmpfs -o size=256k tmpfs "$1" || exit 97
            dir=$1; shift
            dd if=/dev/zero of="$dir/filler" bs=1k 2>/dev/null
            "$@"; rc=$?
            echo "left: $(ls -A "$dir" | tr '\n' ' ')"
            exit $rc
            """
        let r = try await runProcess(
            "/usr/bin/unshare",
            ["-rm", "/bin/sh", "-c", script, "fullstart", disk.path, e2e.binary, "run", "--listen", "127.0.0.1:0",
             "--ca-dir", e2e.caDir.path, "--capture", disk.appendingPathComponent("new.atscap").path],
            in: folder, timeout: .seconds(30))
        #expect(r.status == 1, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stderr.contains("cannot write the capture"), "\(r.stderr)")
        #expect(r.stderr.lowercased().contains("full"), "\(r.stderr)")
        #expect(r.stdout.contains("left: filler \n"), "\(r.stdout)")

        let empty = folder.appendingPathComponent("empty.atscap").path
        #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
        for command in [["show", empty], ["har", empty], ["report", empty], ["view", empty, "--web", "127.0.0.1:0"]] {
            let read = try await runProcess(e2e.binary, command, in: folder, timeout: .seconds(30))
            #expect(read.status == 2, "\(command): \(read.stderr)")
            #expect(read.stderr.contains("\(empty): an empty file, not a capture"), "\(command): \(read.stderr)")
        }
    }

    @Test("A run that cannot listen leaves nothing in its capture: a new file is removed, an existing one keeps its runs")
    func runThatNeverListened() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let holder = try await Proxy(e2e, [], in: folder)  // holds the port the next runs ask for
        let existing = folder.appendingPathComponent("old.atscap").path
        let writer = try CaptureWriter.open(
            path: existing, run: CaptureRunInfo(started: 1, atsproxyVersion: "t", bodyLimit: 0, settings: [:]))
        try writer.close(ended: 2)
        for file in ["new.atscap", "old.atscap"] {
            let path = folder.appendingPathComponent(file).path
            let r = try await runProcess(
                e2e.binary, ["run", "--listen", holder.address, "--ca-dir", e2e.caDir.path, "--capture", path],
                in: folder, timeout: .seconds(30))
            #expect(r.status == 1 && r.stderr.contains("cannot listen on \(holder.address)"), "\(r.stderr)")
            for suffix in ["-wal", "-shm", "-journal"] {
                #expect(!FileManager.default.fileExists(atPath: path + suffix), "\(file)\(suffix) left behind")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("new.atscap").path))
        #expect(try CaptureReader(path: existing).runs().count == 1)
    }

    @Test("A capture on a read-only file system is refused before the proxy starts, naming the file and why")
    func readOnlyFileSystem() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let sealed = folder.appendingPathComponent("sealed")
        try FileManager.default.createDirectory(at: sealed, withIntermediateDirectories: true)
        let existing = sealed.appendingPathComponent("old.atscap").path
        let writer = try CaptureWriter.open(
            path: existing, run: CaptureRunInfo(started: 1, atsproxyVersion: "t", bodyLimit: 0, settings: [:]))
        try writer.close(ended: 2)
        let before = try Data(contentsOf: URL(fileURLWithPath: existing))
        for (file, reason) in [("new.atscap", "read-only file system"), ("old.atscap", "readonly database")] {
            // A private mount namespace where the folder is mounted read-only (root ignores file modes).
            let r = try await runProcess(
                "/usr/bin/unshare",
                ["-rm", "/bin/sh", "-c",
                 "mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\" && shift && exec \"$@\"", "ro",
                 sealed.path, e2e.binary, "run", "--listen", "127.0.0.1:0", "--ca-dir", e2e.caDir.path, "--capture",
                 sealed.appendingPathComponent(file).path],
                in: folder, timeout: .seconds(30))
            #expect(r.status == 1, "\(r.stdout)\n\(r.stderr)")
            #expect(r.stderr.contains("--capture: \(sealed.appendingPathComponent(file).path): cannot"), "\(r.stderr)")
            #expect(r.stderr.lowercased().contains(reason), "\(r.stderr)")
            #expect(!r.stdout.contains("ATSProxy listening"))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: existing)) == before)
    }
}
