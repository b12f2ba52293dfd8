import Foundation
import Testing

/// `--modify-body` through the real binary, with curl against the Python origin.
@Suite("Body rules on responses, end to end (--modify-body)")
struct RuleBodyTests {
    @Test("A gzip response, with its length or chunked, over HTTP/1.1 and h2 and in plain http://: curl --compressed reads the rewritten text")
    func gzipResponses() async throws {
        let stage = try await Stage(["--modify-body", "/world/everyone"])
        let urls = [
            "https://\(Stage.httpsHost)/gzip/hello%20world", "https://\(Stage.httpsHost)/gzip-chunked/hello%20world",
            "http://\(Stage.plainHost)/gzip/hello%20world",
        ]
        for url in urls {
            for version in ["--http1.1", "--http2"] where version == "--http1.1" || url.hasPrefix("https") {
                let r = try await stage.curl([version, "--compressed", url])
                #expect(r.exit == 0, "\(url) \(version): \(r.stderr)")
                #expect(r.status == 200)
                #expect(r.bodyText == "hello everyone", "\(url) \(version)")
                #expect(r.header("Content-Encoding") == "gzip", "\(url) \(version): compressed again")
            }
        }
        // Content-Length: the compressed size of the new body.
        let raw = try await stage.curl(["--http1.1", "https://\(Stage.httpsHost)/gzip/hello%20world"])
        let size = try FileManager.default.attributesOfItem(atPath: raw.body.path)[.size] as? Int
        #expect(raw.header("Content-Length").flatMap(Int.init) == size)
        // The console line marks the rule.
        let line = try await stage.proxy.process.waitForLine(startingWith: "GET https://\(Stage.httpsHost)/gzip/")
        #expect(line.contains("RULE [--modify-body #1] modify-body: 1 replacement"), "\(line)")
    }

    @Test("A 1 MiB text from an h2-only origin, held whole (the upstream credited as it is held) and rewritten: h2 and HTTP/1.1 clients")
    func largeBodyOverHTTP2() async throws {
        let stage = try await H2Stage(files: [:], ["--modify-body", "/world/everyone"])
        let lines = 1 << 20 / 12
        try String(repeating: "hello world\n", count: lines)
            .write(toFile: stage.htdocs.path("big.txt"), atomically: true, encoding: .utf8)
        let expected = String(repeating: "hello everyone\n", count: lines)
        for version in ["--http2", "--http1.1"] {
            let r = try await stage.curlResult([version, "--max-time", "60", stage.url("big.txt")])
            #expect(r.exit == 0, "\(version): \(r.stderr)")
            #expect(r.status == 200)
            #expect(r.bodyText == expected, "\(version): \(r.bodyText.utf8.count) bytes")
        }
    }

    @Test("A POST's body rewritten before it goes up (with and without Expect: 100-continue): the origin hashes the new text")
    func requestBodies() async throws {
        let stage = try await Stage(["--modify-body", "/world/everyone"])
        let expected = try await runProcess(
            "/bin/sh", ["-c", "printf 'hello everyone' | sha256sum | cut -d' ' -f1"], in: stage.folder)
        let digest = expected.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        for extra in [[], ["-H", "Expect: 100-continue"]] {
            for url in ["https://\(Stage.httpsHost)/upload", "http://\(Stage.plainHost)/upload"] {
                let r = try await stage.curl(extra + ["--http1.1", "--data-binary", "hello world", url])
                #expect(r.exit == 0, "\(url) \(extra): \(r.stderr)")
                #expect(r.bodyText == "\(digest) 14\n", "\(url) \(extra)")
            }
        }
        let h2 = try await stage.curl(["--http2", "--data-binary", "hello world", "https://\(Stage.httpsHost)/upload"])
        #expect(h2.bodyText == "\(digest) 14\n", "h2 client")
    }
}
