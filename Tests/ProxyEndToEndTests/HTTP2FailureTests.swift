import Foundation
import Testing

@Suite("HTTP/2 relay: upstream GOAWAY and malformed client frames")
struct HTTP2FailureTests {
    @Test("An upstream GOAWAY mid-load: processed streams complete; the refused ones are retried by curl or reported")
    func upstreamGoAway() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let body = folder.appendingPathComponent("body")
        try Data((0..<8000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }).write(to: body)
        let script = goAwayOriginScript
        let (cert, key) = e2e.cert("good")
        // The first connection answers its first 5 of 20 streams, after a GOAWAY naming the 5th as the last.
        let origin = try TestProcess("/usr/bin/python3", [script, cert, key, body.path, "5", "20"], in: folder, name: "goaway-origin")
        defer { origin.stop() }
        let port = try await origin.waitForOutput { text in
            text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
        }
        let proxy = try await Proxy(e2e, ["--quiet", "--map", "good.test=127.0.0.1:\(port)"], in: folder)
        let out = folder.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let r = try await curlThrough(
            e2e, proxy,
            ["-v", "--http2", "--parallel", "--parallel-max", "100", "--output-dir", out.path, "--remote-name-all",
             "-w", HTTP2MultiplexTests.writeOut] + (0..<20).map { "https://good.test/g\($0)" },
            in: folder, maxTime: 30)
        let transfers = Dictionary(
            r.writeOut.compactMap(HTTP2MultiplexTests.Transfer.init).map { ($0.url, $0) }) { first, _ in first }
        #expect(transfers.count == 20, "\(r.writeOut)")
        func exact(_ i: Int) -> Bool {
            FileManager.default.contentsEqual(atPath: body.path, andPath: out.appendingPathComponent("g\(i)").path)
        }
        func succeeded(_ i: Int) -> Bool {
            transfers["https://good.test/g\(i)"].map { $0.exit == 0 && $0.status == 200 && $0.version == "2" } == true
        }
        // Streams 1…9 (curl numbers them in URL order): processed by the origin, so complete, byte-exact.
        let processed = (0..<5).filter { !(succeeded($0) && exact($0)) }
        #expect(processed.isEmpty, "processed streams that failed: \(processed)\n\(r.writeOut)\n\(r.stderr.suffix(3000))")
        // The 15 refused streams: curl retries them on fresh connections, or reports an error; never a silent
        // success with the wrong bytes. (curl 7.88 sometimes reports the last refused stream as error 18.)
        let retried = (5..<20).filter { succeeded($0) }
        #expect(retried.allSatisfy(exact), "\(r.writeOut)")
        #expect(retried.count >= 10, "most refused streams are retried: \(r.writeOut)\n\(r.stderr.suffix(3000))")
        #expect(r.stderr.contains("GOAWAY"), "\(r.stderr.suffix(3000))")
        // The origin's log: the first connection saw 20 requests, sent GOAWAY with last-stream-id 9 and answered
        // 5; the retries were answered on new connections. Each line is printed when its connection closes.
        func answered(_ log: String) -> Int {
            log.split(separator: "\n").filter { $0.hasPrefix("CONN ") }
                .compactMap { $0.split(separator: " ").first { $0.hasPrefix("answered=") }.flatMap { Int($0.dropFirst(9)) } }
                .reduce(0, +)
        }
        let want = 5 + retried.count
        let log = (try? await origin.waitForOutput(timeout: .seconds(15)) { text in
            text.contains("CONN 1 ") && answered(text) >= want ? text : nil
        }) ?? origin.stdout
        #expect(log.contains("CONN 1 answered=5 goaway_last=9 requests=20"), "\(log)")
        #expect(answered(log) == want, "\(log)")
        #expect(proxy.process.isRunning)
    }

    @Test("3000 streams that the client resets after their END_STREAM, as Go's client does: all served on one connection")
    func resetsAfterEndStream() async throws {
        // hey -h2 through the proxy lost its connection to GOAWAY INTERNAL_ERROR every 20,000-40,000 streams:
        // nghttp2's rapid-reset limiter (1000 at once, 33 a second) counted resets of streams already completed.
        let stage = try await H2Stage(files: ["1k": 1024], ["--quiet"])
        let r = try await runH2CancellingClient(
            stage.e2e, stage.proxy, host: stage.host, path: "/1k", count: 3000, batch: 100, in: stage.folder)
        #expect(r["ok"] as? Int == 3000, "\(r)")
        #expect((r["goaway"] as? Int) == nil, "\(r)")
        #expect(r["closed"] as? Bool == false, "\(r)")
        #expect(r["error"] is NSNull, "\(r)")
        #expect(r["lengths"] as? [Int] == [1024], "\(r)")
        #expect(stage.proxy.process.isRunning)
    }

    @Test("An h2 origin that dies mid-body: the client's stream fails promptly and the exchange is still logged")
    func upstreamDiesMidBody() async throws {
        let e2e = try E2E.shared()
        let log = try e2e.folder().appendingPathComponent("events.jsonl")
        let stage = try await H2Stage(files: ["huge": 64 << 20], ["--quiet", "--log-json", log.path])
        let partial = stage.folder.appendingPathComponent("huge.partial")
        let reader = try stage.backgroundCurl(
            ["--http2", "--limit-rate", "4M", "-o", partial.path, "-w", "%{http_version} %{response_code}",
             stage.url("huge")], maxTime: 30)
        // The origin dies as soon as the body flows. A shell does the watching and the killing: on a loaded machine
        // the test's own sleeps can stretch past the whole download (the cooperative pool is busy elsewhere).
        let killer = try TestProcess(
            "/bin/sh",
            ["-c", "i=0; while [ ! -s '\(partial.path)' ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done; "
                + "kill -9 \(stage.origin.process.pid)"],
            in: stage.folder, name: "origin-killer")
        #expect(try await killer.waitForExit(timeout: .seconds(20)) == 0)
        stage.origin.stop()
        // What was already in flight drains at 4 MiB/s, then the stream ends in an error, not a hang.
        let status = try await reader.waitForExit(timeout: .seconds(20))
        #expect(status != 0, "curl reports the broken transfer")
        #expect(reader.stdout == "2 200", "\(reader.stdout) \(reader.stderr)")
        let deadline = ContinuousClock.now + .seconds(5)
        var lines: [Substring] = []
        while ContinuousClock.now < deadline {
            lines = ((try? String(contentsOf: log, encoding: .utf8)) ?? "").split(separator: "\n")
                .filter { $0.contains("\"kind\":\"exchange\"") && $0.contains("/huge") }
            if !lines.isEmpty { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(lines.count == 1, "one exchange record for the broken stream")
        let exchange = lines.first.flatMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["exchange"] as? [String: Any]
        }
        #expect(exchange?["httpVersion"] as? String == "HTTP/2.0", "\(lines)")
        #expect((exchange?["responseBytes"] as? Int).map { $0 > 0 && $0 < 64 << 20 } == true, "\(lines)")
        #expect(stage.proxy.process.isRunning)
    }

    @Test("Malformed client frames: the proxy answers GOAWAY with the RFC 9113 code and closes only that connection")
    func malformedClientFrames() async throws {
        let stage = try await H2Stage(files: ["load": 100 << 20, "after": 1 << 20], ["--quiet"])
        // A normal h2 download on its own connection, in flight the whole time: 100 MiB at 1 MiB/s cannot end
        // before the bad connections are done (each is bounded by 30 s), so it is stopped and its prefix checked.
        let body = stage.folder.appendingPathComponent("load.out")
        let normal = try stage.backgroundCurl(
            ["--http2", "--limit-rate", "1M", "-o", body.path, stage.url("load")], maxTime: 150)
        defer { normal.stop() }
        // The cases and their codes (6 FRAME_SIZE_ERROR, 1 PROTOCOL_ERROR), each on its own connection, at once.
        let cases = [("settings-length", 6), ("data-stream0", 1), ("oversized", 6)]
        let results = try await withThrowingTaskGroup(of: MalformedOutcome.self) { group in
            for (kind, code) in cases {
                group.addTask { MalformedOutcome(kind, code, try await stage.h2Client("malformed-\(kind)")) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 3)
        for r in results {
            #expect(r.alpn == "h2", "\(r.kind): \(r.text)")
            #expect(r.goAwayCode == r.expectedCode, "\(r.kind): \(r.text)")
            #expect(r.goAwayLast == 0, "\(r.kind): \(r.text)")
            #expect(r.closed == true, "\(r.kind): the proxy closes the connection: \(r.text)")
        }
        #expect(normal.isRunning, "the normal download is still going after the three bad connections: \(normal.stderr)")
        normal.stop()
        // Everything it received so far is the exact start of the file.
        let received = try Data(contentsOf: body)
        let source = try FileHandle(forReadingFrom: URL(fileURLWithPath: stage.htdocs.path("load")))
        defer { try? source.close() }
        let prefix = try source.read(upToCount: received.count) ?? Data()
        #expect(received.count > 0 && received == prefix, "\(received.count) bytes received")
        // And the proxy serves the next h2 client as before.
        let after = stage.folder.appendingPathComponent("after.out")
        let r = try await stage.curl(["--http2", "-o", after.path, "-w", "%{http_version}", stage.url("after")])
        #expect(r.writeOut == ["2"], "\(r.stderr)")
        #expect(stage.htdocs.same("after", as: after))
        #expect(stage.proxy.process.isRunning)
    }

    /// What one malformed-frame client saw (the Sendable part of its JSON).
    struct MalformedOutcome: Sendable {
        var kind: String, expectedCode: Int, alpn: String?, goAwayCode: Int?, goAwayLast: Int?, closed: Bool?
        var text: String
        init(_ kind: String, _ code: Int, _ json: [String: Any]) {
            self.kind = kind
            expectedCode = code
            alpn = json["alpn"] as? String
            let goaway = json["goaway"] as? [String: Any]
            goAwayCode = goaway?["code"] as? Int
            goAwayLast = goaway?["last"] as? Int
            closed = json["closed"] as? Bool
            text = "\(json)"
        }
    }
}
