import Foundation
import Testing

@Suite("HTTP/2 relay: one stream's flow control never stalls the others")
struct HTTP2FlowControlTests {
    @Test("20 concurrent 1 MiB uploads through an origin allowing only 5 streams at once all echo byte-exact")
    func uploadsBeyondUpstreamConcurrency() async throws {
        let stage = try await H2Stage(files: [:], originArguments: ["-m", "5", "--echo-upload"], ["--quiet"])
        let upload = stage.folder.appendingPathComponent("upload")
        let made = try await runProcess(
            "/bin/sh", ["-c", "head -c 1048576 /dev/urandom > '\(upload.path)'"], in: stage.folder)
        #expect(made.status == 0)
        let out = stage.folder.appendingPathComponent("out")
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
        // One connection from the client (the proxy allows it 100 streams); upstream, nghttpd allows 5 at a time,
        // so 15 request bodies wait in the proxy for a stream slot while the first 5 are relayed.
        var arguments = ["--parallel", "--parallel-max", "100"]
        for i in 0..<20 {
            if i > 0 { arguments += ["--next", "-x", stage.proxy.url, "--cacert", stage.e2e.proxyCA, "--max-time", "20"] }
            arguments += ["-s", "--http2", "--data-binary", "@\(upload.path)", "-o", out.appendingPathComponent("e\(i)").path,
                          "-w", "%{http_version} %{exitcode} %{response_code}\n", stage.url("echo\(i)")]
        }
        let r = try await stage.curl(arguments, maxTime: 20)
        #expect(r.writeOut.count == 20 && r.writeOut.allSatisfy { $0 == "2 0 200" }, "\(r.writeOut)")
        let wrong = (0..<20).filter {
            !FileManager.default.contentsEqual(atPath: upload.path, andPath: out.appendingPathComponent("e\($0)").path)
        }
        #expect(wrong.isEmpty, "not echoed byte-exact: \(wrong)")
    }

    @Test("A client that stops reading one response (its stream window at 0) still receives another in full")
    func stalledStreamDoesNotBlockConnection() async throws {
        let stage = try await H2Stage(files: ["stalled": 4 << 20, "other": 1 << 20], ["--quiet"])
        let r = try await stage.h2Client("stall-one", ["/stalled", "/other"])
        #expect(r["other"] as? Int == 1 << 20, "\(r)")
        #expect(r["other_ended"] as? Bool == true, "\(r)")
        // The proxy respected the client's window on the stalled stream: exactly the initial 65 535 bytes.
        #expect(r["stalled"] as? Int == 65_535, "\(r)")
    }

    @Test("An origin that closes right after its last response: a slow-reading client still gets all of it")
    func responseOutlivesUpstreamClose() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let script = closingOriginScript
        let (cert, key) = e2e.cert("good")
        let origin = try TestProcess("/usr/bin/python3", [script, cert, key, "60000"], in: folder, name: "closing-origin")
        defer { origin.stop() }
        let port = try await origin.waitForOutput { text in
            text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
        }
        let proxy = try await Proxy(e2e, ["--quiet", "--map", "good.test=127.0.0.1:\(port)"], in: folder)
        // The client's 1000-byte window keeps most of the response in the proxy when the origin closes.
        let r = try await runH2Client(e2e, proxy, host: "good.test", mode: "small-window", ["/x"], in: folder)
        #expect(r["received"] as? Int == 60000, "\(r)")
        #expect(r["ending"] as? String == "END_STREAM", "\(r)")
        #expect(proxy.process.isRunning)
    }
}
