import Foundation
import Testing

@Suite("HTTP/2 relay: many streams, client resets, flow control")
struct HTTP2MultiplexTests {
    /// What `-w` prints per transfer in these tests.
    static let writeOut = "%{url_effective} %{http_version} %{exitcode} %{response_code} %{num_connects} %{size_download}\n"

    struct Transfer {
        var url: String, version: String, exit: Int, status: Int, connects: Int, size: Int
        init?(_ line: String) {
            let f = line.split(separator: " ").map(String.init)
            guard f.count == 6, let e = Int(f[2]), let s = Int(f[3]), let c = Int(f[4]), let n = Int(f[5]) else {
                return nil
            }
            (url, version, exit, status, connects, size) = (f[0], f[1], e, s, c, n)
        }
    }

    @Test("100 concurrent streams on one client connection (mixed sizes up to 1 MiB) all arrive byte-exact")
    func hundredStreams() async throws {
        // Sizes spread over 0…1 MiB, deterministic.
        let files = Dictionary(uniqueKeysWithValues: (0..<100).map { i in
            ("s\(i)", i == 99 ? 1 << 20 : (i * 10_613) % (1 << 20))
        })
        let stage = try await H2Stage(files: files)
        let out = stage.folder.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        let r = try await stage.curl(
            ["--http2", "--parallel", "--parallel-max", "100", "--output-dir", out.path, "--remote-name-all",
             "-w", Self.writeOut] + (0..<100).map { stage.url("s\($0)") })
        #expect(r.status == 0, "\(r.stderr)")
        let transfers = r.writeOut.compactMap(Transfer.init)
        #expect(transfers.count == 100)
        #expect(transfers.allSatisfy { $0.version == "2" && $0.exit == 0 && $0.status == 200 }, "\(r.writeOut)")
        // One TCP connection (one CONNECT tunnel) carried all of them.
        #expect(transfers.map(\.connects).reduce(0, +) == 1, "\(r.writeOut)")
        let wrong = (0..<100).filter { !stage.htdocs.same("s\($0)", as: out.appendingPathComponent("s\($0)")) }
        if !wrong.isEmpty {
            // The proxy's console line for each says how many bytes it relayed and why the exchange ended, which
            // tells a proxy that stopped apart from a client that stopped reading. Lines are written in batches.
            try await Task.sleep(for: .milliseconds(500))
            let lines = stage.proxy.process.stdout.split(separator: "\n").filter { line in
                wrong.contains { line.contains(stage.url("s\($0)") + " ") }
            }
            Issue.record("not byte-exact: \(wrong); the proxy's lines for them: \(lines)")
        }
    }

    @Test("A stream the client resets mid-body ends alone; the streams beside it finish byte-exact")
    func clientResetsOneStream() async throws {
        var files = ["big": 20 << 20]
        for i in 0..<8 { files["m\(i)"] = 1 << 20 }
        let stage = try await H2Stage(files: files)
        let out = stage.folder.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        // One curl, one connection: "big" is abandoned by --max-time after about 6 MiB (curl resets its stream)
        // while eight slower 1 MiB downloads are still in flight on the same connection.
        let r = try await stage.curl(
            ["--parallel", "--parallel-max", "100",
             "--http2", "--limit-rate", "2M", "--max-time", "3", "-o", out.appendingPathComponent("big").path,
             "-w", Self.writeOut, stage.url("big"),
             "--next", "-x", stage.proxy.url, "--cacert", stage.e2e.proxyCA, "--max-time", "30",
             "--http2", "--limit-rate", "400K", "--output-dir", out.path, "--remote-name-all", "-w", Self.writeOut]
                + (0..<8).map { stage.url("m\($0)") })
        let transfers = r.writeOut.compactMap(Transfer.init)
        #expect(transfers.count == 9, "\(r.writeOut) \(r.stderr)")
        let big = transfers.first { $0.url.hasSuffix("/big") }
        #expect(big?.exit == 28, "the big download timed out: \(r.writeOut)")
        #expect(big.map { $0.size > 0 && $0.size < 20 << 20 } == true, "mid-body: \(r.writeOut)")
        let others = transfers.filter { !$0.url.hasSuffix("/big") }
        #expect(others.count == 8 && others.allSatisfy { $0.exit == 0 && $0.version == "2" }, "\(r.writeOut)")
        #expect(transfers.map(\.connects).reduce(0, +) == 1, "all on one connection: \(r.writeOut)")
        let wrong = (0..<8).filter { !stage.htdocs.same("m\($0)", as: out.appendingPathComponent("m\($0)")) }
        #expect(wrong.isEmpty, "not byte-exact: \(wrong)")
        // The console line of the abandoned download says it was cut off, not just "200".
        let line = try await stage.proxy.process.waitForLine(
            startingWith: "GET \(stage.url("big")) ", timeout: .seconds(5))
        #expect(line.contains(" 200 HTTP/2.0 ") && line.contains("INCOMPLETE: "), "\(line)")
        // The proxy and the upstream connection are fine afterwards.
        let after = try await stage.curl(["--http2", "-o", "/dev/null", "-w", "%{http_version} %{size_download}", stage.url("m0")])
        #expect(after.writeOut == ["2 1048576"], "\(after.stderr)")
    }

    @Test("A slow h2 reader does not make the proxy buffer: 100 MiB at 1 MiB/s, VmRSS grows less than 16 MiB")
    func slowReaderBoundedMemory() async throws {
        let stage = try await H2Stage(files: ["huge": 100 << 20], ["--quiet"])
        let before = try stage.proxy.resources()
        let reader = try stage.backgroundCurl(
            ["--http2", "--limit-rate", "1M", "-o", "/dev/null", stage.url("huge")], maxTime: 120)
        // Long enough for nghttpd to have sent far more than the client read, had flow control not held it back.
        // (The readers are stopped below; their long --max-time only keeps a loaded machine from ending them first.)
        try await Task.sleep(for: .seconds(3))
        let during = try stage.proxy.resources()
        #expect(reader.isRunning, "the slow download is still going: \(reader.stderr)")
        #expect(during.rssKiB <= before.rssKiB + 16 * 1024, "VmRSS \(before.rssKiB) KiB → \(during.rssKiB) KiB")
        reader.stop()
    }
}
