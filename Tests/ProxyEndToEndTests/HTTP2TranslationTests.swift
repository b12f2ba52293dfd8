import Foundation
import Testing

@Suite("HTTP/2 ↔ HTTP/1.1 translation: h2-only clients to HTTP/1.1 origins, HTTP/1.1 clients to h2-only origins")
struct HTTP2TranslationTests {
    // MARK: h2 client ↔ HTTP/1.1 upstream (a pool of upstream connections)

    @Test("An h2-only client to an HTTP/1.1-only origin gets h2; 30 concurrent streams arrive byte-exact over the pool")
    func h2ClientToH1Origin() async throws {
        let stage = try await Stage(["--quiet", "--diagnostics", "1"])
        let sizes = [0, 1, 1024, 65_536, 1_048_576]
        let paths = (0..<30).map { "/bytes/\(sizes[$0 % sizes.count] + $0)" }
        let r = try await runH2LibraryClient(
            stage.e2e, stage.proxy, host: Stage.httpsHost, alpn: ["h2"], mode: "get", paths, in: stage.folder)
        #expect(r["alpn"] as? String == "h2", "\(r)")
        let streams = r["streams"] as? [[String: Any]] ?? []
        #expect(streams.count == paths.count)
        for s in streams {
            let headers = s["headers"] as? [String: String] ?? [:]
            #expect(s["status"] as? Int == 200, "\(s)")
            #expect(s["sha256"] as? String == headers["x-body-sha256"], "\(s["path"] ?? "")")
            // The origin saw the path and no proxy-only fields.
            #expect(headers["x-seen-target"] == s["path"] as? String)
        }
        // The trace shows what the app would get from this origin: HTTP/1.1.
        let trace = try await stage.proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.components(separatedBy: "Did Finish").count > paths.count ? text : nil
        }
        #expect(trace.contains("Protocol Enqueue: request GET https://\(Stage.httpsHost)/bytes/0 HTTP/1.1"))
        #expect(trace.contains("Response: HTTP/1.1 200"))
        #expect(!trace.contains("HTTP/2.0"), "\(trace.suffix(2000))")
    }

    @Test("An h2-only client's upload without content-length reaches the HTTP/1.1 origin chunked and byte-exact")
    func h2UploadToH1Origin() async throws {
        let stage = try await Stage(["--quiet"])
        let r = try await runH2LibraryClient(
            stage.e2e, stage.proxy, host: Stage.httpsHost, alpn: ["h2"], mode: "post", ["/upload", "3000000"],
            in: stage.folder)
        let stream = (r["streams"] as? [[String: Any]])?.first ?? [:]
        #expect(stream["status"] as? Int == 200, "\(r)")
        #expect(stream["text"] as? String == "\(r["sent_sha256"] as? String ?? "?") 3000000\n", "\(r)")
    }

    @Test("--block http to an h2-only client: the 502 block answer comes over h2, with its x-ats-* fields")
    func blockHTTPToH2OnlyClient() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "expired", in: folder)
        let proxy = try await Proxy(e2e, origin.map("expired.test") + ["--block", "http", "--quiet"], in: folder)
        let r = try await runH2LibraryClient(
            e2e, proxy, host: "expired.test", alpn: ["h2"], mode: "get", ["/bytes/10", "/"], in: folder)
        #expect(r["alpn"] as? String == "h2", "\(r)")
        for s in r["streams"] as? [[String: Any]] ?? [] {
            let headers = s["headers"] as? [String: String] ?? [:]
            #expect(s["status"] as? Int == 502, "\(s)")
            #expect(headers["x-ats-error"] == "-1202 NSURLErrorServerCertificateUntrusted", "\(headers)")
        }
    }

    // MARK: HTTP/1.1 client ↔ h2 upstream

    @Test("curl --http1.1 to an h2-only origin (--upstream-alpn ios): HTTP/1.1 to curl, HTTP/2 upstream, byte-exact",
          arguments: [0, 1024, 10 * 1024 * 1024])
    func h1ClientToH2Origin(size: Int) async throws {
        let name = "f\(size)"
        let stage = try await H2Stage(files: [name: size], ["--upstream-alpn", "ios", "--diagnostics", "1"])
        let body = stage.folder.appendingPathComponent("body")
        let r = try await stage.curl(["--http1.1", "-o", body.path, "-w", "%{http_version} %{response_code}", stage.url(name)])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.writeOut == ["1.1 200"])
        #expect(stage.htdocs.same(name, as: body))
        // The trace shows what the app would get from this origin: HTTP/2.
        let trace = try await stage.proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("Did Finish") ? text : nil
        }
        #expect(trace.contains("Protocol Enqueue: request GET \(stage.url(name)) HTTP/2.0"), "\(trace.suffix(3000))")
        #expect(trace.contains("Response: HTTP/2.0 200"), "\(trace.suffix(3000))")
    }

    @Test("Default --upstream-alpn mirror: curl --http1.1 to an h2-only origin that closes it is retried offering h2, once")
    func mirrorLearnsH2OnlyOrigin() async throws {
        let stage = try await H2Stage(files: ["a": 70_000], [])
        for attempt in 1...2 {
            let body = stage.folder.appendingPathComponent("a\(attempt)")
            let r = try await stage.curl(["--http1.1", "-o", body.path, "-w", "%{http_version} %{response_code}", stage.url("a")])
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.writeOut == ["1.1 200"], "attempt \(attempt)")
            #expect(stage.htdocs.same("a", as: body), "attempt \(attempt)")
        }
        let lines = try await stage.proxy.process.waitForOutput { text in
            text.split(separator: "\n").filter { $0.hasPrefix("GET \(stage.url("a")) 200 HTTP/2.0") }.count == 2 ? text : nil
        }
        #expect(!lines.isEmpty)
        // Learned once: the second connection offered h2 from the start.
        let notices = stage.proxy.process.stderr.components(separatedBy: "it is taken for h2-only").count - 1
        #expect(notices == 1, "\(stage.proxy.process.stderr)")
    }

    @Test("curl --http1.1: three requests on one keep-alive connection to an h2-only origin, one connection, byte-exact")
    func h1KeepAliveToH2Origin() async throws {
        let stage = try await H2Stage(files: ["a": 100, "b": 200_000, "c": 0], ["--upstream-alpn", "ios", "--quiet"])
        let outputs = ["a", "b", "c"].map { stage.folder.appendingPathComponent("out-\($0)") }
        let r = try await stage.curl(
            ["--http1.1", "-w", "%{response_code} %{num_connects}\\n"]
                + zip(["a", "b", "c"], outputs).flatMap { ["-o", $0.1.path, stage.url($0.0)] })
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.writeOut == ["200 1", "200 0", "200 0"])
        for (name, output) in zip(["a", "b", "c"], outputs) { #expect(stage.htdocs.same(name, as: output), "\(name)") }
    }

    @Test("curl --http1.1 uploads 4 MiB to an h2-only origin that echoes it: the echo is byte-exact")
    func h1UploadToH2Origin() async throws {
        let stage = try await H2Stage(files: ["echo": 1], originArguments: ["--echo-upload"], ["--upstream-alpn", "ios", "--quiet"])
        let upload = stage.folder.appendingPathComponent("upload")
        try Data((0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) }).write(to: upload)
        let echoed = stage.folder.appendingPathComponent("echoed")
        let r = try await stage.curl(
            ["--http1.1", "--data-binary", "@\(upload.path)", "-o", echoed.path, "-w", "%{response_code}", stage.url("echo")])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.writeOut == ["200"])
        #expect(FileManager.default.contentsEqual(atPath: upload.path, andPath: echoed.path))
    }
}
