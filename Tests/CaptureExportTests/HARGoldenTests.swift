import ATSPolicy
import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace
import TestSupport
import Testing

@testable import CaptureExport

// Golden HAR files: each case is written to a capture, read back and exported; the document must equal
// Golden/<case>.har byte for byte. After a deliberate change of the format, regenerate them with
// `ATSPROXY_UPDATE_GOLDEN=1 swift test --skip-build --filter HARGolden` and review the diff.

private let goldenFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden")
private let t0 = 1_795_000_000.0  // 2026-11-18T...Z: fixed, so the goldens are stable

private func timings(_ offsets: (Double, Double?, Double?, Double)) -> ExchangeTimings {
    ExchangeTimings(
        started: t0 + offsets.0, requestSent: offsets.1.map { t0 + $0 }, firstResponseByte: offsets.2.map { t0 + $0 },
        ended: t0 + offsets.3)
}

private let leaf = CertificateFacts(
    subject: "CN=api.example.com", issuer: "CN=Example CA", keyType: .ec, keyBits: 256, curve: "P-256",
    signatureHash: .sha256, isSelfSigned: false, isCA: false, notBefore: Date(timeIntervalSince1970: 1_780_000_000),
    notAfter: Date(timeIntervalSince1970: 1_810_000_000), dnsNames: ["api.example.com"], ipAddresses: [],
    extendedKeyUsages: [CertificateFacts.serverAuthOID], embeddedSCTCount: 2, spkiSHA256Base64: "c3BraQ==",
    sha256Fingerprint: "AB:CD")

private func handshake(_ version: TLSVersion, suite: String, alpn: String?) -> HandshakeFacts {
    HandshakeFacts(
        version: version, cipherSuiteCode: 0x1301, cipherSuiteName: suite, keyExchangeGroup: "X25519", alpn: alpn,
        chain: [leaf], trust: .trustedByUserRoot, hostnameMatches: true, observedAt: Date(timeIntervalSince1970: t0))
}

private func connection(
    _ id: UInt64, clientALPN: String? = "http/1.1", upstream: HandshakeFacts?, decision: PolicyDecision?,
    violations: [ATSViolation] = [], address: String? = "203.0.113.5:443"
) -> ConnectionRecord {
    ConnectionRecord(
        connectionID: id, clientAddress: "127.0.0.1:50123", upstreamAddress: address,
        clientTLS: upstream == nil && clientALPN == nil
            ? nil
            : TLSLegFacts(
                version: "TLSv1.3", cipherSuite: "TLS_AES_128_GCM_SHA256", alpn: clientALPN, serverName: "api.example.com",
                resumed: false),
        upstreamTLS: upstream?.failure == nil && upstream != nil
            ? TLSLegFacts(
                version: upstream?.version?.plistName, cipherSuite: upstream?.cipherSuiteName, alpn: upstream?.alpn,
                serverName: "api.example.com", resumed: false)
            : nil,
        upstreamHandshake: upstream, decision: decision, violations: violations)
}

private let defaults = PolicyDecision(keyPath: [], reason: "no exception entry matches api.example.com")

private func gzipped() -> [UInt8] {
    // gzip.compress(b'{"greeting": "hello, hello, hello"}\n', mtime=0)
    [31, 139, 8, 0, 0, 0, 0, 0, 2, 3, 171, 86, 74, 47, 74, 77, 45, 201, 204, 75, 87, 178, 82, 80, 202, 72, 205, 201,
     201, 215, 81, 64, 166, 148, 106, 185, 0, 58, 219, 148, 202, 36, 0, 0, 0]
}

/// The exchanges of each golden case.
private func exchanges(_ name: String) -> [ExchangeSummary] {
    switch name {
    case "h1":
        var e = ExchangeSummary(
            method: "GET", url: "https://api.example.com/v1/items?q=a%20b&page=2", status: 200,
            httpVersion: "HTTP/1.1", outcome: .allowed, errors: [], requestBytes: 0, responseBytes: 27,
            durationMilliseconds: 12.5)
        e.connection = connection(7, upstream: handshake(.tls13, suite: "TLS_AES_128_GCM_SHA256", alpn: "http/1.1"),
                                  decision: defaults)
        e.action = .relayed
        e.detail = ExchangeDetail(
            request: HTTPRequestHead(
                method: "GET", target: "/v1/items?q=a%20b&page=2",
                headers: [("Host", "api.example.com"), ("Cookie", "session=abc; theme=dark"), ("Accept", "*/*")]),
            response: HTTPResponseHead(
                status: 200, reason: "OK",
                headers: [("Content-Type", "application/json"), ("Content-Length", "27"),
                          ("Set-Cookie", "id=42; Path=/; Domain=example.com; Expires=Wed, 21 Oct 2026 07:28:00 GMT; HttpOnly; Secure")]),
            timings: timings((0, 0.001, 0.0105, 0.0125)), requestBody: CapturedBody(bytes: [], totalBytes: 0),
            responseBody: CapturedBody(bytes: Array("{\"items\": [\"a\", \"b\", \"c\"]}".utf8), totalBytes: 27))
        return [e]
    case "h2":
        var e = ExchangeSummary(
            method: "POST", url: "https://api.example.com/login", status: 200, httpVersion: "HTTP/2.0",
            outcome: .violation, errors: [ExchangeError(urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9824))],
            requestBytes: 23, responseBytes: 45, durationMilliseconds: 30)
        let violation = ATSViolation(
            kind: .cipherSuiteNotAllowed, urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9824),
            explanation: "the suite TLS_RSA_WITH_AES_128_GCM_SHA256 has no forward secrecy",
            fix: .setKeys(domain: "api.example.com", keys: [FixKey(key: "NSExceptionRequiresForwardSecrecy", value: .bool(false))]))
        e.connection = connection(
            8, clientALPN: "h2", upstream: handshake(.tls12, suite: "TLS_RSA_WITH_AES_128_GCM_SHA256", alpn: "h2"),
            decision: defaults, violations: [violation])
        e.action = .annotated
        e.detail = ExchangeDetail(
            request: HTTPRequestHead(
                method: "POST", target: "/login", version: HTTPVersion(major: 2, minor: 0),
                headers: [(":authority", "api.example.com"), ("content-type", "application/x-www-form-urlencoded"),
                          ("accept-encoding", "gzip")]),
            response: HTTPResponseHead(
                version: HTTPVersion(major: 2, minor: 0), status: 200, reason: "",
                headers: [("content-type", "application/json"), ("content-encoding", "gzip")]),
            clientResponse: HTTPResponseHead(
                version: HTTPVersion(major: 2, minor: 0), status: 200, reason: "",
                headers: [("content-type", "application/json"), ("content-encoding", "gzip"),
                          ("x-ats-violation", "-1200/-9824")]),
            timings: timings((0, 0.002, 0.025, 0.030)),
            requestBody: CapturedBody(bytes: Array("user=j%C3%B6rg&pass=a+b".utf8), totalBytes: 23),
            responseBody: CapturedBody(bytes: gzipped(), totalBytes: 45))
        return [e]
    case "blocked":
        var e = ExchangeSummary(
            method: "CONNECT", url: "https://old.example.com", status: nil, kind: .refusedHandshake, outcome: .blocked,
            errors: [ExchangeError(urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836))], requestBytes: 0,
            responseBytes: 0, durationMilliseconds: 40)
        let violation = ATSViolation(
            kind: .tlsVersionTooLow, urlError: URLErrorCode(-1200), sslError: SSLErrorCode(-9836),
            explanation: "the server negotiated TLS 1.0; ATS requires TLS 1.2",
            fix: .setKeys(domain: "old.example.com", keys: [FixKey(key: "NSExceptionMinimumTLSVersion", value: .string("TLSv1.0"))]))
        var facts = handshake(.tls10, suite: "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", alpn: nil)
        facts.keyExchangeGroup = nil
        e.connection = connection(
            9, upstream: facts,
            decision: PolicyDecision(keyPath: ["NSAppTransportSecurity"], reason: "ATS defaults apply to old.example.com"),
            violations: [violation])
        e.action = .blockedHandshake
        e.detail = ExchangeDetail(timings: timings((0, nil, nil, 0.040)))
        return [e]
    case "tunnel":
        var e = ExchangeSummary(
            method: "CONNECT", url: "https://pinned.example.com:8443", status: nil, kind: .tunnel,
            outcome: .notEvaluated, errors: [], requestBytes: 517, responseBytes: 4096, durationMilliseconds: 250,
            note: "pinned host: tunnelled, not intercepted")
        e.connection = connection(10, clientALPN: nil, upstream: nil, decision: nil, address: "[2001:db8::5]:8443")
        e.action = .tunnelled
        e.detail = ExchangeDetail(timings: timings((0, nil, nil, 0.25)))
        return [e]
    case "upgraded":
        var upgrade = ExchangeSummary(
            method: "GET", url: "http://chat.example.com/socket", status: 101, httpVersion: "HTTP/1.1",
            outcome: .violation, errors: [ExchangeError(urlError: URLErrorCode(-1022))], requestBytes: 0,
            responseBytes: 0, durationMilliseconds: 3)
        upgrade.connection = connection(
            11, clientALPN: nil, upstream: nil,
            decision: PolicyDecision(keyPath: [], reason: "cleartext HTTP is not allowed by default"),
            violations: [ATSViolation(
                kind: .cleartextNotAllowed, urlError: URLErrorCode(-1022), sslError: nil,
                explanation: "http:// needs an exception",
                fix: .setKeys(domain: "chat.example.com", keys: [FixKey(key: "NSExceptionAllowsInsecureHTTPLoads", value: .bool(true))]))],
            address: "198.51.100.7:80")
        upgrade.action = .annotated
        upgrade.detail = ExchangeDetail(
            request: HTTPRequestHead(
                method: "GET", target: "http://chat.example.com/socket",
                headers: [("Host", "chat.example.com"), ("Upgrade", "websocket"), ("Connection", "Upgrade")]),
            forwardedRequest: HTTPRequestHead(
                method: "GET", target: "/socket",
                headers: [("Host", "chat.example.com"), ("Upgrade", "websocket"), ("Connection", "Upgrade")]),
            response: HTTPResponseHead(
                status: 101, reason: "Switching Protocols", headers: [("Upgrade", "websocket"), ("Connection", "Upgrade")]),
            timings: timings((0, 0.001, 0.003, 0.003)))
        var end = ExchangeSummary(
            method: "GET", url: "http://chat.example.com/socket", status: 101, httpVersion: "UPGRADED",
            outcome: .violation, errors: [ExchangeError(urlError: URLErrorCode(-1022))], requestBytes: 120,
            responseBytes: 3400, durationMilliseconds: 5000, note: "upgraded connection ended: the client closed")
        end.connection = upgrade.connection
        end.action = .annotated
        end.detail = ExchangeDetail(timings: timings((0.003, nil, nil, 5.003)))
        return [upgrade, end]
    case "binary":
        var e = ExchangeSummary(
            method: "GET", url: "https://api.example.com/logo.png", status: 200, httpVersion: "HTTP/1.1",
            outcome: .allowed, errors: [], requestBytes: 0, responseBytes: 24, durationMilliseconds: 5)
        e.connection = connection(12, upstream: handshake(.tls13, suite: "TLS_AES_128_GCM_SHA256", alpn: "http/1.1"),
                                  decision: defaults)
        e.action = .relayed
        e.detail = ExchangeDetail(
            request: HTTPRequestHead(method: "GET", target: "/logo.png", headers: [("Host", "api.example.com")]),
            response: HTTPResponseHead(status: 200, reason: "OK", headers: [("Content-Type", "image/png")]),
            timings: timings((0, 0.001, 0.004, 0.005)),
            responseBody: CapturedBody(
                bytes: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 0x0D, 0x49, 0x48, 0x44, 0x52, 0, 0, 0, 1,
                        0, 0, 0, 1],
                totalBytes: 24))
        return [e]
    case "cut":
        var e = ExchangeSummary(
            method: "GET", url: "https://api.example.com/big.txt", status: 200, httpVersion: "HTTP/1.1",
            outcome: .allowed, errors: [], requestBytes: 0, responseBytes: 5000, durationMilliseconds: 8)
        e.connection = connection(13, upstream: handshake(.tls13, suite: "TLS_AES_128_GCM_SHA256", alpn: "http/1.1"),
                                  decision: defaults)
        e.action = .relayed
        // 32 bytes kept of 5000, cut inside the two-byte "é": the text ends before it.
        let kept = Array(String(repeating: "line ", count: 6).utf8) + [0x63, 0xC3]
        e.detail = ExchangeDetail(
            request: HTTPRequestHead(method: "GET", target: "/big.txt", headers: [("Host", "api.example.com")]),
            response: HTTPResponseHead(
                status: 200, reason: "OK", headers: [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", "5000")]),
            timings: timings((0, 0.001, 0.002, 0.008)), responseBody: CapturedBody(bytes: kept, totalBytes: 5000))
        return [e]
    case "ruled":
        // Answered by a map-local rule (never sent upstream), a header added to the answer by another.
        var e = ExchangeSummary(
            method: "GET", url: "https://api.example.com/v1/profile", status: 200, httpVersion: "HTTP/1.1",
            outcome: .allowed, errors: [], requestBytes: 0, responseBytes: 16, durationMilliseconds: 1.5)
        e.connection = connection(14, upstream: nil, decision: defaults, address: nil)
        e.action = .relayed
        e.rules = [
            AppliedRule(id: "profile", action: "map-local", point: "request-head", note: "served mocks/profile.json"),
            AppliedRule(id: "--modify-headers #1", action: "modify-headers", point: "response-head"),
        ]
        e.detail = ExchangeDetail(
            request: HTTPRequestHead(method: "GET", target: "/v1/profile", headers: [("Host", "api.example.com")]),
            clientResponse: HTTPResponseHead(
                status: 200, reason: "OK",
                headers: [("Content-Type", "application/json"), ("Content-Length", "16"), ("X-Mocked", "1")]),
            timings: timings((0, nil, 0.001, 0.0015)),
            responseBody: CapturedBody(bytes: Array("{\"name\": \"mock\"}".utf8), totalBytes: 16))
        return [e]
    default:
        return []
    }
}

/// The HAR document of `name`'s exchanges, through a capture file (written, then read back).
private func exported(_ name: String) throws -> String {
    let folder = try TestScratch.folder("har")
    let path = folder.appendingPathComponent("c.atscap").path
    let writer = try CaptureWriter.open(
        path: path, run: CaptureRunInfo(started: t0, atsproxyVersion: "test", bodyLimit: 32, settings: [:]))
    try writer.write(exchanges(name).map(CaptureItem.exchange))
    try writer.close(ended: t0 + 10)
    var text = ""
    try HARDocument(creatorVersion: "test").write(from: try CaptureReader(path: path)) { text += $0 }
    return text
}

@Suite("HAR export")
struct HARGoldenTests {
    @Test("Each kind of exchange exports as its golden HAR", arguments: ["h1", "h2", "blocked", "tunnel", "upgraded", "binary", "cut", "ruled"])
    func golden(_ name: String) throws {
        let text = try exported(name)
        let file = goldenFolder.appendingPathComponent(name + ".har")
        if ProcessInfo.processInfo.environment["ATSPROXY_UPDATE_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(at: goldenFolder, withIntermediateDirectories: true)
            try Data(text.utf8).write(to: file)
        }
        let golden = try String(contentsOf: file, encoding: .utf8)
        #expect(text == golden, "\(name): the export differs from \(file.lastPathComponent)")
        // Whatever the golden says, the document is JSON and its entry's time is the sum of its timings.
        let json = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let entries = try #require((json["log"] as? [String: Any])?["entries"] as? [[String: Any]])
        #expect(entries.count == exchanges(name).count)
        for entry in entries {
            let t = try #require(entry["timings"] as? [String: Double])
            let sum = ["blocked", "dns", "connect", "send", "wait", "receive", "ssl"].compactMap { t[$0] }.filter { $0 >= 0 }
                .reduce(0, +)
            #expect(abs(sum - (entry["time"] as? Double ?? -1)) < 0.0005)
        }
    }

    @Test("The facts golden files are made to show: decoded gzip, base64 binary, cut marks, server address, ATS fields")
    func facts() throws {
        func entry(_ name: String) throws -> [String: Any] {
            let json = try #require(try JSONSerialization.jsonObject(with: Data(try exported(name).utf8)) as? [String: Any])
            return try #require(((json["log"] as? [String: Any])?["entries"] as? [[String: Any]])?.first)
        }
        let h2 = try entry("h2")
        let content = try #require((h2["response"] as? [String: Any])?["content"] as? [String: Any])
        #expect(content["text"] as? String == "{\"greeting\": \"hello, hello, hello\"}\n")
        #expect(content["size"] as? Int == 36)
        #expect(content["compression"] as? Int == -9)
        #expect((h2["request"] as? [String: Any])?["httpVersion"] as? String == "HTTP/2")
        let params = try #require(((h2["request"] as? [String: Any])?["postData"] as? [String: Any])?["params"] as? [[String: String]])
        #expect(params == [["name": "user", "value": "jörg"], ["name": "pass", "value": "a b"]])
        let ats = try #require(h2["_ats"] as? [String: Any])
        #expect(ats["verdict"] as? String == "violation")
        #expect(ats["decidedBy"] as? String == "ATS defaults")
        #expect(((ats["violations"] as? [[String: Any]])?.first?["fix"] as? String)?.contains("NSExceptionRequiresForwardSecrecy") == true)

        let binary = try entry("binary")
        let png = try #require((binary["response"] as? [String: Any])?["content"] as? [String: Any])
        #expect(png["encoding"] as? String == "base64")
        #expect(Data(base64Encoded: png["text"] as? String ?? "")?.prefix(4) == Data([0x89, 0x50, 0x4E, 0x47]))
        #expect(binary["serverIPAddress"] as? String == "203.0.113.5")

        let cut = try #require(((try entry("cut"))["response"] as? [String: Any])?["content"] as? [String: Any])
        #expect(cut["size"] as? Int == 5000)
        #expect(cut["_truncated"] as? Bool == true)
        #expect(cut["_originalSize"] as? Int == 5000)
        #expect(cut["text"] as? String == String(repeating: "line ", count: 6) + "c")

        let tunnel = try entry("tunnel")
        #expect(tunnel["serverIPAddress"] as? String == "2001:db8::5")
        #expect((tunnel["response"] as? [String: Any])?["status"] as? Int == 0)
        #expect((tunnel["_atsproxy"] as? [String: Any])?["kind"] as? String == "tunnel")

        // The rules that acted: in a custom field, in order, and readable in the comment a HAR viewer shows.
        let ruled = try entry("ruled")
        let rules = try #require(ruled["_atsproxyRules"] as? [[String: String]])
        #expect(rules == [
            ["id": "profile", "action": "map-local", "point": "request-head", "note": "served mocks/profile.json"],
            ["id": "--modify-headers #1", "action": "modify-headers", "point": "response-head"],
        ])
        #expect(ruled["comment"] as? String
            == "changed by rules: [profile] map-local: served mocks/profile.json; [--modify-headers #1] modify-headers")
        #expect(try entry("h1")["_atsproxyRules"] == nil, "no rule, no field")
    }
}

@Suite("HAR export read by real consumers")
struct HARConsumerTests {
    @Test("Every kind of exchange in one HAR: the JSON schema of HAR 1.2, haralyzer and mitmproxy (mitmdump -nr) read it")
    func consumers() throws {
        let folder = try TestScratch.folder("harc")
        let capture = folder.appendingPathComponent("all.atscap").path
        let writer = try CaptureWriter.open(
            path: capture, run: CaptureRunInfo(started: t0, atsproxyVersion: "test", bodyLimit: 32, settings: [:]))
        let all = ["h1", "h2", "blocked", "tunnel", "upgraded", "binary", "cut", "ruled"].flatMap(exchanges)
        try writer.write(all.map(CaptureItem.exchange))
        try writer.close(ended: t0 + 10)
        var text = ""
        let count = try HARDocument(creatorVersion: "test").write(from: try CaptureReader(path: capture)) { text += $0 }
        #expect(count == all.count)
        let har = folder.appendingPathComponent("all.har")
        try Data(text.utf8).write(to: har)

        let python = try TestPython.path()
        let check = try runTool(python, [schemaFolder.appendingPathComponent("check_har.py").path, har.path])
        #expect(check.status == 0, "\(check.output)")
        #expect(check.output.contains("ok \(all.count) entries, \(all.count) flows"), "\(check.output)")

        let mitmdump = URL(fileURLWithPath: python).deletingLastPathComponent().appendingPathComponent("mitmdump").path
        let dump = try runTool(mitmdump, ["-n", "-r", har.path, "--flow-detail", "3"])
        #expect(dump.status == 0, "\(dump.output)")
        #expect(dump.output.contains("POST https://api.example.com/login HTTP/2"), "\(dump.output)")
        #expect(dump.output.contains("\"greeting\": \"hello, hello, hello\""), "mitmproxy decoded the gzip body: \(dump.output)")
        #expect(dump.output.contains("CONNECT old.example.com:443"), "a blocked handshake is a CONNECT: \(dump.output)")
        #expect(dump.output.contains("\"name\": \"mock\""), "the mocked answer is read too: \(dump.output)")
    }
}

private let schemaFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Schema")

/// Runs a tool to its end (killed after 120 s), with its stdout and then its stderr as one text.
private func runTool(_ path: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let run = try runCommand(path, arguments)
    return (run.status, run.stdoutText + run.stderrText)
}

@Suite("HAR export details")
struct HARDetailTests {
    @Test("Content codings: gzip and zlib deflate are inflated; a cut, damaged or unknown coding is not")
    func decoding() {
        let zlib: [UInt8] = [120, 156, 203, 72, 205, 201, 201, 215, 81, 72, 73, 77, 203, 73, 44, 73, 5, 0, 38, 173, 5, 54]
        #expect(ContentDecoding.decode(zlib, coding: "deflate") == Array("hello, deflate".utf8))
        #expect(ContentDecoding.decode(gzipped(), coding: "GZIP") == Array("{\"greeting\": \"hello, hello, hello\"}\n".utf8))
        #expect(ContentDecoding.decode(Array(gzipped().prefix(20)), coding: "gzip") == nil, "cut")
        #expect(ContentDecoding.decode(Array("plain".utf8), coding: "gzip") == nil, "not gzip")
        var damaged = gzipped()
        damaged[20] ^= 0xFF
        #expect(ContentDecoding.decode(damaged, coding: "gzip") == nil, "damaged: the CRC does not match")
        var badAdler = zlib
        badAdler[badAdler.count - 1] ^= 1
        #expect(ContentDecoding.decode(badAdler, coding: "deflate") == nil, "the Adler-32 does not match")
        #expect(ContentDecoding.decode(zlib, coding: "br") == nil)
    }

    @Test("A header value that is not UTF-8 (kept as its bytes) reads as Latin-1, and its size counts its bytes")
    func latin1HeaderValue() throws {
        let value = FieldBytes.string([0x61, 0x74, 0x74, 0x61, 0x63, 0x68, 0x6D, 0x65, 0x6E, 0x74, 0x3B, 0x20, 0xE9])
        let field = HTTPHeaders.Field(name: "Content-Disposition", value: value)
        #expect(HAREntry.nameValue(field).compact() == #"{"name":"Content-Disposition","value":"attachment; é"}"#)
    }

    @Test("URLs are absolute: a CONNECT's authority gets https://, a refused malformed target goes under unknown.invalid")
    func urls() {
        #expect(HAREntry.absoluteURL("https://a.test/x?y", kind: .exchange) == "https://a.test/x?y")
        #expect(HAREntry.absoluteURL("a.test:8443", kind: .tunnel) == "https://a.test:8443")
        #expect(HAREntry.absoluteURL("-", kind: .exchange) == "http://unknown.invalid/")
        #expect(HAREntry.absoluteURL("/relative?q", kind: .exchange) == "http://unknown.invalid/relative?q")
    }

    @Test("Numbers: at most three decimals, no exponent; dates in UTC with milliseconds")
    func formats() {
        #expect(HARValue.number(12.5) == "12.5")
        #expect(HARValue.number(0.0004) == "0")
        #expect(HARValue.number(3.14159) == "3.142")
        #expect(HARValue.number(1e-9) == "0")
        #expect(HARValue.number(0.05) == "0.05")
        #expect(HARDate.iso8601(0.0015) == "1970-01-01T00:00:00.001Z")
        #expect(HARDate.iso8601(1_795_000_000.25) == "2026-11-18T11:06:40.250Z")
        #expect(HARDate.fromHTTPDate("Wed, 21 Oct 2026 07:28:00 GMT") == 1_792_567_680)
    }

    @Test("Compact rendering is the same JSON on one line, strings escaped")
    func compact() throws {
        let value = HARValue.object([
            HARMember("a", .array([.int(1), .double(2.5), .bool(true)])), HARMember("b\"", .string("x\ny\u{1}")),
            HARMember("c", .object([])),
        ])
        #expect(value.compact() == #"{"a":[1,2.5,true],"b\"":"x\ny\u0001","c":{}}"#)
        let pretty = try JSONSerialization.jsonObject(with: Data(value.rendered().utf8)) as? NSDictionary
        let compact = try JSONSerialization.jsonObject(with: Data(value.compact().utf8)) as? NSDictionary
        #expect(pretty == compact)
    }
}

@Suite("One exchange as text: rules")
struct ExchangeTextRulesTests {
    @Test("show ID lists the rules that acted on the exchange, after its console line that names them too")
    func rulesShown() throws {
        let path = try TestScratch.folder("text-rules").appendingPathComponent("c.atscap").path
        let writer = try CaptureWriter.open(
            path: path, run: CaptureRunInfo(started: t0, atsproxyVersion: "test", bodyLimit: 32, settings: [:]))
        try writer.write(exchanges("ruled").map(CaptureItem.exchange) + exchanges("h1").map(CaptureItem.exchange))
        try writer.close(ended: t0 + 10)
        let reader = try CaptureReader(path: path)
        let text = ExchangeText(previewBytes: 64, colour: false).render(try #require(try reader.exchange(id: 1)), trace: [])
        #expect(text.contains("RULE [profile] map-local: served mocks/profile.json"), "\(text)")
        #expect(text.contains("""
            Rules that acted
              [profile] map-local: served mocks/profile.json (at the request-head point)
              [--modify-headers #1] modify-headers (at the response-head point)
            """), "\(text)")
        let plain = ExchangeText(previewBytes: 64, colour: false).render(try #require(try reader.exchange(id: 2)), trace: [])
        #expect(!plain.contains("Rules that acted"))
    }
}
