import Foundation
import Testing

@Suite("HTTP/2 relay: ALPN mirroring, byte-exact bodies, ATS per stream")
struct HTTP2RelayTests {
    @Test("curl --http2 to an h2 origin gets HTTP/2 and the exact bytes; the trace says HTTP/2.0",
          arguments: [0, 1024, 10 * 1024 * 1024])
    func h2Download(size: Int) async throws {
        let name = "f\(size)"
        let stage = try await H2Stage(files: [name: size], ["--diagnostics", "1"])
        let body = stage.folder.appendingPathComponent("body")
        let r = try await stage.curl(["--http2", "-o", body.path, "-w", "%{http_version}", stage.url(name)])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.writeOut == ["2"])
        let served = try await sha256(of: URL(fileURLWithPath: stage.htdocs.path(name)), in: stage.folder)
        #expect(try await sha256(of: body, in: stage.folder) == served)
        let url = stage.url(name)
        let trace = try await stage.proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("Did Finish") ? text : nil
        }
        #expect(trace.contains("Protocol Enqueue: request GET \(url) HTTP/2.0"), "\(trace.suffix(3000))")
        #expect(trace.contains("Response: HTTP/2.0 200"), "\(trace.suffix(3000))")
    }

    @Test("curl --http2 to an HTTP/1.1-only origin is answered with http/1.1 (the upstream's choice is mirrored)")
    func mirrorsHTTP11() async throws {
        let stage = try await Stage(["--quiet"])
        let result = try await stage.curl(["--http2", "-w", "%{http_version}", "https://\(Stage.httpsHost)/bytes/65536"])
        #expect(result.exit == 0, "\(result.stderr)")
        #expect(result.writeOut == ["1.1"])
        #expect(try await stage.matchesAnnouncedChecksum(result), "\(result.headerText)")
    }

    @Test("--ats annotate: an h2 origin with an expired certificate answers over h2 with lowercase x-ats-* fields")
    func annotateH2() async throws {
        let stage = try await H2Stage(
            files: ["a": 4096], certificate: "expired", host: "expired.test", ["--ats", "annotate", "--quiet"])
        let result = try await stage.curlResult(["--http2", "-w", "%{http_version} %{response_code}", stage.url("a")])
        #expect(result.exit == 0, "\(result.stderr)")
        #expect(result.writeOut == ["2 200"])
        #expect(stage.htdocs.same("a", as: result.body))
        let text = result.headerText
        // h2 forbids uppercase field names (RFC 9113 §8.2.1): curl prints them as received.
        #expect(text.contains("\r\nx-ats-verdict: violation\r\n"), "\(text)")
        #expect(text.contains("\r\nx-ats-error: -1202 NSURLErrorServerCertificateUntrusted\r\n"), "\(text)")
        #expect(!text.contains("X-ATS-"), "\(text)")
    }

    @Test("--block http: a policy-violating h2 origin gets the 502 block answer (http/1.1 for a client offering both)")
    func blockHTTPOverH2Offer() async throws {
        let stage = try await H2Stage(
            files: ["a": 4096], certificate: "expired", host: "expired.test", ["--block", "http", "--quiet"])
        let result = try await stage.curlResult(["--http2", "-w", "%{http_version} %{response_code}", stage.url("a")])
        #expect(result.exit == 0, "\(result.stderr)")
        // A client that offers both is answered http/1.1 while blocking (an h2-only client gets h2).
        #expect(result.writeOut == ["1.1 502"])
        #expect(result.header("X-ATS-Error") == "-1202 NSURLErrorServerCertificateUntrusted", "\(result.headerText)")
        #expect(!stage.htdocs.same("a", as: result.body))
    }

    @Test("A client offering h2 and http/1.1 to an HTTP/1.1-only origin gets http/1.1, and Upgrade/101 relays")
    func upgradeWithH2Offer() async throws {
        let stage = try await Stage(["--quiet"])
        let r = try await runH2Client(stage.e2e, stage.proxy, host: Stage.httpsHost, mode: "upgrade", in: stage.folder)
        #expect(r["alpn"] as? String == "http/1.1", "\(r)")
        #expect((r["status"] as? String)?.hasPrefix("HTTP/1.1 101") == true, "\(r)")
        #expect(r["echoed"] as? Bool == true, "\(r)")
    }
}
