import CaptureStore
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Pins of tunnelled NSPinnedDomains hosts, checked on a side connection")
struct PinCheckEndToEndTests {
    /// SPKI-SHA256-BASE64 of a test certificate, as the openssl CLI computes it (what NSPinnedLeafIdentities holds).
    private func spki(_ cert: String, in folder: URL) async throws -> String {
        let r = try await runProcess(
            "/bin/sh",
            ["-c", "openssl x509 -in \"$1\" -pubkey -noout | openssl pkey -pubin -outform DER "
                + "| openssl dgst -sha256 -binary | base64", "sh", cert], in: folder)
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func plist(pin: String, in folder: URL) throws -> URL {
        let url = folder.appendingPathComponent("pinned.plist")
        try """
            <?xml version="1.0" encoding="UTF-8"?>
            <plist version="1.0"><dict><key>NSAppTransportSecurity</key><dict><key>NSPinnedDomains</key><dict>
            <key>passthrough.test</key><dict><key>NSPinnedLeafIdentities</key><array><dict>
            <key>SPKI-SHA256-BASE64</key><string>\(pin)</string></dict></array></dict></dict></dict></dict></plist>
            """.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    @Test("The right pin: the tunnel's line says the pin matches, and the line stays ATS ok")
    func rightPin() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "passthrough", in: folder)
        let pin = try await spki(e2e.cert("passthrough").cert, in: folder)
        let proxy = try await Proxy(
            e2e, origin.map("passthrough.test") + ["--plist", try plist(pin: pin, in: folder).path], in: folder)
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.testCA, "https://passthrough.test/bytes/64"], in: folder)
        #expect(r.status == 200, "\(r.stderr)")
        let line = try await proxy.process.waitForLine(startingWith: "CONNECT https://passthrough.test --- TUNNEL ")
        #expect(line.contains(" TUNNEL ATS ok "), "\(line)")
        #expect(line.contains("; pin matches (checked on a side connection)"), "\(line)")
    }

    @Test("A wrong pin: the tunnel is not blocked, but its line, notice, trace and JSON say the pin fails")
    func wrongPin() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "passthrough", in: folder)
        let served = try await spki(e2e.cert("passthrough").cert, in: folder)
        let wrong = try await spki(e2e.cert("good").cert, in: folder)
        let log = folder.appendingPathComponent("events.jsonl")
        let capture = folder.appendingPathComponent("pins.atscap").path
        let proxy = try await Proxy(
            e2e, origin.map("passthrough.test") + [
                "--plist", try plist(pin: wrong, in: folder).path, "--log-json", log.path, "--diagnostics", "1",
                "--capture", capture,
            ], in: folder)
        // The device decides: the bytes flow (curl does not pin), and the proxy says the app will fail.
        let r = try await curl(["-x", proxy.url, "--cacert", e2e.testCA, "https://passthrough.test/bytes/64"], in: folder)
        #expect(r.status == 200, "\(r.stderr)")
        let line = try await proxy.process.waitForLine(startingWith: "CONNECT https://passthrough.test --- TUNNEL ")
        #expect(line.contains(" TUNNEL ATS VIOLATION -1202/-9886 "), "\(line)")
        #expect(line.contains("PIN MISMATCH (checked on a side connection): served SPKI-SHA256: leaf \(served)"), "\(line)")
        #expect(line.contains("expected NSPinnedLeafIdentities \(wrong)"), "\(line)")
        let notice = try await proxy.process.waitForOutput(stderr: true) { text in
            text.split(separator: "\n").first { $0.contains("does not match the app's pin") }.map(String.init)
        }
        #expect(notice.contains("passthrough.test:443: the server's key does not match the app's pin (NSPinnedDomains › "
            + "passthrough.test): served SPKI-SHA256: leaf \(served)"), "\(notice)")
        // The trace's decision names the violation with both hashes.
        let trace = try await proxy.process.waitForOutput(stderr: true) { text in
            text.contains("NSPinnedLeafIdentities") && text.contains("the device's pin check will fail") ? text : nil
        }
        #expect(trace.contains(wrong) && trace.contains(served))
        // JSON: the exchange carries the codes, the decision event the explanation with the hashes.
        let events = try await jsonEvents(log) { events in
            events.contains { $0["kind"] as? String == "exchange" } && events.contains { $0["kind"] as? String == "atsDecision" }
        }
        let exchange = events.first { $0["kind"] as? String == "exchange" }
        let exchangeText = String(decoding: try JSONSerialization.data(withJSONObject: exchange ?? [:]), as: UTF8.self)
        #expect(exchangeText.contains("-9886"), "\(exchangeText)")
        let decisions = events.filter { $0["kind"] as? String == "atsDecision" }
        // JSONSerialization writes "/" (common in base64) as "\/".
        let decisionText = String(decoding: try JSONSerialization.data(withJSONObject: decisions), as: UTF8.self)
            .replacingOccurrences(of: "\\/", with: "/")
        #expect(decisionText.contains("pinMismatch") && decisionText.contains(served), "\(decisionText)")
        // A second tunnel reuses the cached check: same verdict, no second notice.
        let again = try await curl(
            ["-x", proxy.url, "--cacert", e2e.testCA, "https://passthrough.test/bytes/32"], in: folder)
        #expect(again.status == 200)
        let second = try await proxy.process.waitForOutput { text in
            let lines = text.split(separator: "\n").filter { $0.hasPrefix("CONNECT https://passthrough.test --- TUNNEL ") }
            return lines.count >= 2 ? String(lines[1]) : nil
        }
        #expect(second.contains(" TUNNEL ATS VIOLATION -1202/-9886 "), "\(second)")
        #expect(proxy.process.stderr.components(separatedBy: "does not match the app's pin").count == 2)
        // The capture keeps the tunnel's record as the line has it (stopped as a user does, so it is committed).
        kill(proxy.process.pid, SIGINT)
        #expect(try await proxy.process.waitForExit() == 0)
        let tunnels = try CaptureReader(path: capture).exchanges().filter { $0.record.url == "https://passthrough.test" }
        #expect(tunnels.count == 2)
        #expect(tunnels.allSatisfy { $0.record.errors.map(\.shortCode) == ["-1202/-9886"] })
        #expect(tunnels.first?.record.note?.contains("leaf \(served)") == true, "\(tunnels.first?.record.note ?? "")")
    }
}
