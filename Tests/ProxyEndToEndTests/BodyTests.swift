import Foundation
import Testing

@Suite("Bodies cross the proxy byte-exact")
struct BodyTests {
    static let sizes = [0, 1024, 10 * 1024 * 1024]

    @Test("Downloads of 0 B, 1 KiB, 10 MiB, chunked and close-delimited bodies, through HTTPS interception and plain http://",
          arguments: ["https", "http"])
    func downloads(scheme: String) async throws {
        let stage = try await Stage()
        let host = scheme == "https" ? Stage.httpsHost : Stage.plainHost
        for size in Self.sizes {
            let r = try await stage.curl(["\(scheme)://\(host)/bytes/\(size)"])
            #expect(r.exit == 0, "\(scheme) \(size): \(r.stderr)")
            #expect(r.status == 200)
            let length = try FileManager.default.attributesOfItem(atPath: r.body.path)[.size] as? Int
            #expect(length == size, "\(scheme) \(size) bytes")
            #expect(try await stage.matchesAnnouncedChecksum(r), "\(scheme) \(size) bytes")
        }
        let chunked = try await stage.curl(["\(scheme)://\(host)/chunked/300000"])
        #expect(chunked.exit == 0, "\(chunked.stderr)")
        #expect(chunked.header("Transfer-Encoding")?.lowercased() == "chunked")
        #expect(try await stage.matchesAnnouncedChecksum(chunked))
        // A body that ends with the upstream connection (no length, no chunking) still arrives whole.
        let untilClose = try await stage.curl(["\(scheme)://\(host)/eof/300000"])
        #expect(untilClose.exit == 0, "\(untilClose.stderr)")
        #expect(try await stage.matchesAnnouncedChecksum(untilClose))
    }

    @Test("A 10 MiB upload (with curl's Expect: 100-continue) and a chunked upload reach the origin byte-exact",
          arguments: ["https", "http"])
    func uploads(scheme: String) async throws {
        let stage = try await Stage()
        let host = scheme == "https" ? Stage.httpsHost : Stage.plainHost
        let file = stage.folder.appendingPathComponent("upload.bin")
        let made = try await runProcess(
            "/bin/sh", ["-c", "head -c 10485760 /dev/urandom > '\(file.path)'"], in: stage.folder)
        #expect(made.status == 0)
        let expected = try await sha256(of: file, in: stage.folder)
        let r = try await stage.curl(["--data-binary", "@\(file.path)", "\(scheme)://\(host)/upload"])
        #expect(r.exit == 0, "\(r.stderr)")
        #expect(r.bodyText == "\(expected) 10485760\n")
        #expect(r.headerText.contains("100 Continue"), "curl asks for 100-continue above 1 MiB; the proxy relays it")

        let chunked = try await stage.curl([
            "-H", "Transfer-Encoding: chunked", "--data-binary", "@\(file.path)", "\(scheme)://\(host)/upload",
        ])
        #expect(chunked.exit == 0, "\(chunked.stderr)")
        #expect(chunked.bodyText == "\(expected) 10485760\n")
    }
}
