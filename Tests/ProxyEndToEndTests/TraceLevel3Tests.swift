import Foundation
import Testing

@Suite("Diagnostics level 3: hex dumps of the relayed plaintext")
struct TraceLevel3Tests {
    /// One HTTPS exchange over HTTP/1.1 through a proxy at `level`; returns the proxy's stderr once it finished.
    private func trace(level: Int) async throws -> String {
        let stage = try await Stage(["--diagnostics", String(level)])
        let r = try await stage.curl(["--http1.1", "https://\(Stage.httpsHost)/bytes/1024"])
        #expect(r.status == 200, "\(r.stderr)")
        return try await stage.proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("Did Finish") ? text : nil
        }
    }

    @Test("--diagnostics 3 writes SSL-WRITE (request) and SSL-READ (response) dumps of the HTTP/1.1 plaintext")
    func level3Dumps() async throws {
        let stderr = try await trace(level: 3)
        #expect(stderr.contains(try Regex("SSL-WRITE \\([0-9]+\\)")), "\(stderr.suffix(3000))")
        #expect(stderr.contains(try Regex("SSL-READ \\([0-9]+\\)")), "\(stderr.suffix(3000))")
        // The request line as the upstream got it: "GET /bytes/1024 " is exactly the first 16-byte row.
        #expect(stderr.contains("> 00000000: 47 45 54 20 2f 62 79 74 65 73 2f 31 30 32 34 20  GET /bytes/1024 "),
                "\(stderr.suffix(3000))")
        // The response as the client got it starts with its status line.
        #expect(stderr.contains("< 00000000: 48 54 54 50 2f 31 2e 31 20 32 30 30"), "\(stderr.suffix(3000))")
    }

    @Test("--diagnostics 1 writes no hex dumps")
    func level1HasNone() async throws {
        let stderr = try await trace(level: 1)
        #expect(stderr.contains("Protocol Received"))
        #expect(!stderr.contains("SSL-READ"))
        #expect(!stderr.contains("SSL-WRITE"))
        #expect(!stderr.contains("00000000: "))
    }
}
