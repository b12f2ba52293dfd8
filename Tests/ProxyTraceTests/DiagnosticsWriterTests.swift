import ATSPolicy
import Foundation
import Testing

@testable import ProxyTrace

@Suite("CFNetwork diagnostics envelope (reference §5.2)")
struct DiagnosticsWriterTests {
    @Test("A record has CFNetwork's envelope, right-aligned keys and a closing tag with the same [L:N]")
    func envelope() throws {
        var writer = DiagnosticsWriter(level: 1)
        let rendered = writer.render(
            .tcpConnectionStart(connectionID: 7, host: "example.com", port: 443),
            at: TraceTime(hour: 14, minute: 2, second: 11, millisecond: 5))
        let text = try #require(rendered)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.first == "CFNetwork Diagnostics [1:1] 14:02:11.005 {")
        #expect(lines.last == "} [1:1]")
        #expect(lines[1] == "\tTCP Connection Start: (null)")
        // Every body line's colon sits in the same column as the title's.
        let column = lines[1].firstIndex(of: ":").map { lines[1].distance(from: lines[1].startIndex, to: $0) }
        for line in lines[2 ..< lines.count - 1] {
            let c = line.firstIndex(of: ":").map { line.distance(from: line.startIndex, to: $0) }
            #expect(c == column, "misaligned: \(line)")
        }
        #expect(text.contains("Connection ID: 7"))
    }

    @Test("The sequence number counts written records; filtered records take no number")
    func sequenceAndLevels() {
        var writer = DiagnosticsWriter(level: 1)
        let t = TraceTime(unixTime: 0)
        let first = writer.render(.loaderWhatToDo(method: "GET", url: "https://a/"), at: t)
        let filtered = writer.render(.hexDump(connectionID: 1, read: true, bytes: [1, 2, 3]), at: t)
        let second = writer.render(.didFinish(totalMilliseconds: 3, totalBytes: 10), at: t)
        #expect(first?.contains("[1:1]") == true)
        #expect(filtered == nil)
        #expect(second?.contains("[1:2]") == true)
    }

    @Test("Level 0 writes nothing; level 3 includes hex dumps")
    func levelZeroAndThree() {
        var off = DiagnosticsWriter(level: 0)
        let nothing = off.render(.loaderWhatToDo(method: "GET", url: "https://a/"), at: TraceTime(unixTime: 0))
        #expect(nothing == nil)
        var full = DiagnosticsWriter(level: 3)
        let dump = full.render(.hexDump(connectionID: 2, read: false, bytes: Array("GET / HTTP/1.1\r\n\r\n".utf8)),
                               at: TraceTime(unixTime: 0))
        #expect(dump?.contains("SSL-WRITE (2): 18 bytes") == true)
        #expect(dump?.contains("> 00000000: 47 45 54 20") == true)
        #expect(dump?.contains("GET / HTTP/1.1..") == true)
    }

    @Test("Level 1 leaves out the headers and TLS details that level 2 adds; level 2 leaves out the bytes")
    func levelsDiffer() {
        let facts = HandshakeFacts(
            version: .tls13, cipherSuiteCode: 0x1301, cipherSuiteName: "TLS_AES_128_GCM_SHA256",
            keyExchangeGroup: "x25519", alpn: "h2", chain: [], trust: .trustedByUserRoot, hostnameMatches: true,
            observedAt: Date(timeIntervalSince1970: 0))
        let t = TraceTime(unixTime: 0)
        func rendered(_ level: Int) -> String {
            var writer = DiagnosticsWriter(level: level)
            let records: [DiagnosticsRecord] = [
                .tlsHandshake(connectionID: 1, facts: facts),
                .protocolEnqueue(method: "GET", url: "https://a/", httpVersion: "HTTP/1.1", headers: [("X-Probe", "1")]),
                .protocolReceived(
                    method: "GET", url: "https://a/", httpVersion: "HTTP/1.1", status: 200,
                    headers: [("Content-Type", "text/plain")]),
                .hexDump(connectionID: 1, read: true, bytes: Array("HTTP/1.1 200 OK\r\n".utf8)),
            ]
            return records.compactMap { writer.render($0, at: t) }.joined()
        }
        let one = rendered(1)
        let two = rendered(2)
        let three = rendered(3)
        for summary in ["Protocol: TLSv1.3", "ALPN: h2", "Trust: chains to a user-installed root", "Response: HTTP/1.1 200",
                        "Session: full handshake"] {
            #expect(one.contains(summary) && two.contains(summary) && three.contains(summary), "\(summary)")
        }
        for detail in ["Cipher Suite: TLS_AES_128_GCM_SHA256", "Group: x25519", "Sending: X-Probe: 1",
                       "Received: Content-Type: text/plain"] {
            #expect(!one.contains(detail), "level 1 has \(detail)")
            #expect(two.contains(detail) && three.contains(detail), "level 2 and 3 have \(detail)")
        }
        #expect(!one.contains("SSL-READ") && !two.contains("SSL-READ"))
        #expect(three.contains("SSL-READ (1): 17 bytes"))
    }

    @Test("The TLS Handshake record says whether the session was resumed; a failed one says why and has no session")
    func handshakeSession() {
        var writer = DiagnosticsWriter(level: 1)
        let facts = HandshakeFacts(
            version: .tls13, cipherSuiteCode: 0x1301, cipherSuiteName: "TLS_AES_128_GCM_SHA256",
            keyExchangeGroup: "x25519", alpn: "h2", chain: [], trust: .trustedByUserRoot, hostnameMatches: true,
            observedAt: Date(timeIntervalSince1970: 0))
        let t = TraceTime(unixTime: 0)
        let resumed = writer.render(.tlsHandshake(connectionID: 1, facts: facts, resumed: true), at: t)
        #expect(resumed?.contains("Session: resumed") == true)
        let full = writer.render(.tlsHandshake(connectionID: 2, facts: facts), at: t)
        #expect(full?.contains("Session: full handshake") == true)
        var failed = facts
        failed.failure = .alertReceived(70)
        let failedText = writer.render(.tlsHandshake(connectionID: 3, facts: failed), at: t)
        #expect(failedText?.contains("Result: failed (the server sent the alert protocol_version (70))\n") == true)
        #expect(failedText?.contains("Session:") == false)
    }

    @Test("The TLS Handshake record names the trust result in words, not as a Swift value")
    func handshakeTrust() {
        var writer = DiagnosticsWriter(level: 1)
        var facts = HandshakeFacts(
            version: .tls13, cipherSuiteCode: 0x1301, cipherSuiteName: "TLS_AES_128_GCM_SHA256",
            keyExchangeGroup: "x25519", alpn: nil, chain: [], trust: .untrusted(.selfSigned), hostnameMatches: true,
            observedAt: Date(timeIntervalSince1970: 0))
        let t = TraceTime(unixTime: 0)
        #expect(writer.render(.tlsHandshake(connectionID: 1, facts: facts), at: t)?
            .contains("Trust: untrusted (selfSigned)") == true)
        facts.trust = .trustedByUserRoot
        #expect(writer.render(.tlsHandshake(connectionID: 2, facts: facts), at: t)?
            .contains("Trust: chains to a user-installed root") == true)
    }

    @Test("A failed handshake's record says its protocol and suite are the probe's, not the app's")
    func probeFields() {
        var writer = DiagnosticsWriter(level: 1)
        let facts = HandshakeFacts(
            failure: .alertReceived(70), version: .tls10, cipherSuiteCode: 0xC014,
            cipherSuiteName: "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", keyExchangeGroup: nil, alpn: nil, chain: [],
            trust: .untrusted(.noCertificate), hostnameMatches: false, observedAt: Date(timeIntervalSince1970: 0),
            serverCapabilities: ServerCapabilities(
                supportedVersions: [.tls10], preferredCipherCode: 0xC014, preferredCipherName: nil,
                supportsForwardSecrecy: true))
        let text = writer.render(.tlsHandshake(connectionID: 1, facts: facts), at: TraceTime(unixTime: 0)) ?? ""
        let probe = text.range(of: "Probe: ATSProxy offered every version and suite")
        let version = text.range(of: "Protocol: TLSv1.0")
        #expect(probe != nil && version != nil && probe!.lowerBound < version!.lowerBound, "\(text)")
    }

    @Test("Time of day is UTC with milliseconds")
    func timeOfDay() {
        #expect(TraceTime(unixTime: 86_400 * 3 + 3_723.0456).description == "01:02:03.045")
    }

    @Test("Response Error carries the app's full NSError with the SSL domain and code")
    func responseError() throws {
        var writer = DiagnosticsWriter(level: 1)
        let error = NSErrorDescription(
            urlError: .secureConnectionFailed, sslError: .peerProtocolVersion, failingURL: "https://old.test/")
        let rendered = writer.render(.responseError(url: "https://old.test/", error: error), at: TraceTime(unixTime: 0))
        let text = try #require(rendered)
        #expect(text.contains("Error: Error Domain=NSURLErrorDomain Code=-1200 "))
        #expect(text.contains("_kCFStreamErrorDomainKey=3, _kCFStreamErrorCodeKey=-9836"))
        #expect(text.contains("NSUnderlyingError=0x0 {Error Domain=kCFErrorDomainCFNetwork Code=-1200"))
    }

    @Test("-1022 carries no SSL keys (reference §4.3)")
    func cleartextErrorHasNoSSLKeys() {
        let error = NSErrorDescription(urlError: .requiresSecureConnection, sslError: nil, failingURL: "http://a/")
        #expect(error.description.contains("Code=-1022"))
        #expect(!error.description.contains("_kCFStreamErrorCodeKey"))
        #expect(!error.description.contains("Would you like to connect"))
    }

    @Test("Trust failures carry the recovery suggestion")
    func trustFailureSuggestion() {
        let error = NSErrorDescription(urlError: .serverCertificateUntrusted, sslError: .noRootCert, failingURL: "https://a/")
        #expect(error.description.contains("NSLocalizedRecoverySuggestion=Would you like to connect to the server anyway?"))
    }
}

@Suite("Exchange summaries")
struct ExchangeSummaryTests {
    let blocked = ExchangeSummary(
        method: "GET", url: "https://old.test/x", status: 502, httpVersion: "HTTP/1.1", outcome: .blocked,
        errors: [ExchangeError(urlError: .secureConnectionFailed, sslError: .peerProtocolVersion)], requestBytes: 0,
        responseBytes: 1536, durationMilliseconds: 12.4)

    @Test("The console line names method, URL, status, verdict with codes, size and time")
    func consoleLine() {
        #expect(blocked.consoleLine(colour: false) == "GET https://old.test/x 502 HTTP/1.1 ATS BLOCKED -1200/-9836 1.5 KiB 12 ms")
    }

    @Test("Sizes in B, KiB and MiB with one decimal; times in tenths below 10 ms, whole milliseconds above",
          arguments: [
            (0, 0.0, "0 B 0.0 ms"), (1023, 0.25, "1023 B 0.2 ms"), (1024, 9.99, "1.0 KiB 9.9 ms"),
            (1536, 10.4, "1.5 KiB 10 ms"), (10_239, 10.5, "9.9 KiB 11 ms"), (1_048_575, 999.6, "1023.9 KiB 1000 ms"),
            (1_048_576, 12_345.0, "1.0 MiB 12345 ms"), (10_485_760 + 524_288, 0.05, "10.5 MiB 0.0 ms"),
          ])
    func numbers(bytes: Int, milliseconds: Double, expected: String) {
        let summary = ExchangeSummary(
            method: "GET", url: "http://a.test/", status: nil, httpVersion: "HTTP/1.1", outcome: .notEvaluated,
            errors: [], requestBytes: 0, responseBytes: bytes, durationMilliseconds: milliseconds)
        #expect(summary.consoleLine(colour: false) == "GET http://a.test/ --- HTTP/1.1 ATS n/a " + expected)
    }

    @Test("A response cut off mid-body says so after its status, so it does not pass for a success")
    func interrupted() {
        let cut = ExchangeSummary(
            method: "GET", url: "https://h2.test/big", status: 200, httpVersion: "HTTP/2.0", outcome: .allowed,
            errors: [], requestBytes: 0, responseBytes: 3 << 20, durationMilliseconds: 40,
            interruption: "reset by the client (CANCEL)")
        #expect(cut.consoleLine(colour: false)
            == "GET https://h2.test/big 200 HTTP/2.0 ATS ok 3.0 MiB 40 ms INCOMPLETE: reset by the client (CANCEL)")
    }

    @Test("Colour only when asked (a terminal)")
    func colour() {
        #expect(blocked.consoleLine(colour: true).contains("\u{1B}[31mATS BLOCKED"))
        #expect(!blocked.consoleLine(colour: false).contains("\u{1B}"))
    }

    @Test("A JSON log line decodes back to the same event")
    func jsonRoundTrip() throws {
        let event = TraceEvent(kind: .exchange, time: 1_700_000_000.25, connectionID: 9, url: blocked.url, exchange: blocked)
        let line = try event.jsonLine()
        #expect(!line.contains("\n"))
        let back = try JSONDecoder().decode(TraceEvent.self, from: Data(line.utf8))
        #expect(back == event)
    }

    @Test("A tlsHandshake event carries sessionResumed; other events leave it out")
    func sessionResumedInJSON() throws {
        let facts = HandshakeFacts(
            version: .tls12, cipherSuiteCode: 0xC02F, cipherSuiteName: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            keyExchangeGroup: nil, alpn: nil, chain: [], trust: .trustedBySystemRoot, hostnameMatches: true,
            observedAt: Date(timeIntervalSince1970: 0))
        let event = TraceEvent(kind: .tlsHandshake, time: 1, connectionID: 3, handshake: facts, sessionResumed: true)
        let line = try event.jsonLine()
        #expect(line.contains("\"sessionResumed\":true"))
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .secondsSince1970
        #expect(try decoder.decode(TraceEvent.self, from: Data(line.utf8)) == event)
        let other = try TraceEvent(kind: .exchange, time: 1, connectionID: 3, exchange: blocked).jsonLine()
        #expect(!other.contains("sessionResumed"))
    }
}
