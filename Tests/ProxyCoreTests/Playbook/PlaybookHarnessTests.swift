import ATSPolicy
import Testing

@testable import ProxyCore

/// The harness itself: a playbook that differs from the session fails, with a diff a reader can act on.
@Suite("Playbook harness")
struct PlaybookHarnessTests {
    /// A playbook of the cleartext refusal whose reports are kept instead of recorded.
    private func refusal(_ reports: Reports) throws -> Playbook {
        let pb = Playbook(try SessionHarness.environment())
        pb.report = { text, _ in reports.texts.append(text) }
        pb >> .clientBytes(bytes("GET http://plain.test/ HTTP/1.1\r\nHost: plain.test\r\n\r\n"))
        return pb
    }

    private final class Reports { var texts: [String] = [] }

    @Test("A wrong command fails check() with both sides, one line per command, the first difference marked")
    func diffMarksFirstDifference() throws {
        let reports = Reports()
        let pb = try refusal(reports)
        pb << .startTimer(.requestHead)
        pb << .closeClient
        #expect(!pb.check())
        let text = try #require(reports.texts.first)
        #expect(reports.texts.count == 1)
        let lines = text.split(separator: "\n").map(String.init)
        let expected = try #require(lines.firstIndex(of: "expected:"))
        let actual = try #require(lines.firstIndex(of: "actual:"))
        #expect(Array(lines[(expected + 1)..<actual]) == [
            "    >> clientBytes(\"GET http://plain.test/ HTTP/1.1\\r\\nHost: plain.test\\r\\n\\r\\n\")",
            "    << startTimer(.requestHead, after: any)",
            "  ▶ << closeClient",
        ])
        let got = Array(lines[(actual + 1)...])
        #expect(got.count == 4, "\(got)")
        #expect(got.dropFirst().first == "    << startTimer(.requestHead, after: 30.0 seconds)")
        #expect(got.dropFirst(2).first?.hasPrefix("  ▶ << sendToClient(\"HTTP/1.1 403 Forbidden\\r\\n") == true)
        let logged = "    << log(exchange: GET http://plain.test/ 403 HTTP/1.1 ATS BLOCKED -1022"
        #expect(got.last?.hasPrefix(logged) == true, "\(got)")
    }

    @Test("Commands the playbook does not list fail it, marked where the list ends; so does a missing command")
    func extraAndMissingCommands() throws {
        let extra = Reports()
        let pb = try refusal(extra)
        pb << .startTimer(.requestHead)
        pb << .sendToClient(.prefix("HTTP/1.1 403 "))
        #expect(!pb.check())
        #expect(extra.texts.first?.contains("  ▶ (nothing more)\nactual:") == true, "\(extra.texts)")
        #expect(extra.texts.first?.contains("  ▶ << log(exchange: GET http://plain.test/ 403") == true)

        let missing = Reports()
        let short = try refusal(missing)
        short << .startTimer(.requestHead)
        short << .sendToClient(.prefix("HTTP/1.1 403 "))
        short << .anyLogs
        short << .closeClient
        #expect(!short.check())
        #expect(missing.texts.first?.hasSuffix("  ▶ (nothing more)") == true, "\(missing.texts)")
    }

    @Test("anyLogs takes any run of log commands, and leaves a log the next line expects to it")
    func anyLogs() throws {
        let reports = Reports()
        let pb = try refusal(reports)
        pb << .startTimer(.requestHead)
        pb << .sendToClient(.prefix("HTTP/1.1 403 "))
        pb << .anyLogs
        pb << .log(.exchange("GET", "http://plain.test/", status: 403, .blocked, codes: "-1022"))
        #expect(pb.check())
        #expect(reports.texts.isEmpty)
    }

    @Test("After a difference no more events are fed; a playbook dropped unchecked is reported")
    func stopsAndReportsUnchecked() throws {
        let reports = Reports()
        do {
            let pb = try refusal(reports)
            pb << .closeClient
            pb >> .clientBytes(bytes("GET http://plain.test/2 HTTP/1.1\r\nHost: plain.test\r\n\r\n"))
            pb << .closeClient
        }
        #expect(reports.texts.count == 1)
        #expect(reports.texts.first?.contains("differ from the playbook at event 1") == true, "\(reports.texts)")
        #expect(reports.texts.first?.contains("/2 HTTP") == false, "the second event was not fed")

        let unchecked = Reports()
        do {
            let pb = try refusal(unchecked)
            pb << .startTimer(.requestHead)
        }
        #expect(unchecked.texts == ["The playbook was not checked after its last step: call check()"])
    }

    @Test("Wire text: HTTP as text, TLS as its records with clear alerts named, other bytes as a short hex prefix")
    func wireText() {
        #expect(WireText.bytes(bytes("HTTP/1.1 200 OK\r\n\r\n")) == "\"HTTP/1.1 200 OK\\r\\n\\r\\n\"")
        #expect(WireText.bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 70])
            == "TLS[alert(fatal protocol_version)] (7 bytes)")
        #expect(WireText.bytes([0x17, 0x03, 0x03, 0x00, 0x01, 0xAA, 0x17, 0x03, 0x03, 0x00, 0x01, 0xBB])
            == "TLS[application_data ×2] (12 bytes)")
        #expect(WireText.bytes([0x00, 0xFF, 0x10]) == "hex[00 ff 10] (3 bytes)")
        let long = WireText.bytes(Array(repeating: 0x61, count: 500))
        #expect(long.hasSuffix("… (500 bytes)"))
    }

    @Test("Decrypted HTTP/2 as its frames (type, stream, END_STREAM or ACK); HTTP/1 text and cut frames are not frames")
    func h2FrameText() throws {
        let client = try H2Peer(.client)
        try client.get("/a")
        #expect(WireText.h2Frames(client.output()) == "h2[preface, SETTINGS, HEADERS 1 END_STREAM]")
        let settingsAck: [UInt8] = [0, 0, 0, 4, 1, 0, 0, 0, 0]
        let goAway: [UInt8] = [0, 0, 8, 7, 0, 0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 0]
        #expect(WireText.h2Frames(settingsAck + goAway) == "h2[SETTINGS ACK, GOAWAY]")
        #expect(WireText.h2Frames(Array(settingsAck.dropLast())) == nil)
        #expect(WireText.h2Frames(bytes("HTTP/1.1 200 OK\r\n\r\n")) == nil)
        #expect(WireText.plaintext(bytes("GET / HTTP/1.1\r\n\r\n")) == "\"GET / HTTP/1.1\\r\\n\\r\\n\"")
    }
}
