import ATSPolicy
import Testing

@testable import ProxyCore

@Suite("X-ATS headers and --block http answers")
struct ATSAnswerTests {
    let decision = PolicyDecision(
        keyPath: ["NSAppTransportSecurity", "NSExceptionDomains", "old.test"],
        reason: "exception entry `old.test` matches the host exactly")
    let version = ATSViolation(
        kind: .tlsVersionTooLow, urlError: .secureConnectionFailed, sslError: .peerProtocolVersion,
        explanation: "server negotiated TLS 1.0; ATS requires TLS 1.2 or later",
        fix: .setKeys(domain: "old.test", keys: [FixKey(key: "NSExceptionMinimumTLSVersion", value: .string("TLSv1.0"))]))

    @Test("Headers carry the first violation's URL and SSL errors and the deciding rule")
    func headers() {
        let answer = ATSAnswer(url: "https://old.test/", decision: decision, violations: [version])
        let h = Dictionary(answer.headers, uniquingKeysWith: { a, _ in a })
        #expect(h["X-ATS-Error"] == "-1200 NSURLErrorSecureConnectionFailed")
        #expect(h["X-ATS-SSL-Error"] == "-9836 errSSLPeerProtocolVersion")
        #expect(h["X-ATS-Rule"] == "NSAppTransportSecurity/NSExceptionDomains/old.test")
        #expect(h["X-ATS-Verdict"] == "violation")
        #expect(answer.blockStatus == 502)
    }

    @Test("A cleartext block is 403 with -1022 and no SSL header")
    func cleartext() {
        let v = ATSViolation(
            kind: .cleartextNotAllowed, urlError: .requiresSecureConnection, sslError: nil,
            explanation: "http:// load to a host that requires TLS",
            fix: .setKeys(domain: "plain.test", keys: [FixKey(key: "NSExceptionAllowsInsecureHTTPLoads", value: .bool(true))]))
        let answer = ATSAnswer(url: "http://plain.test/", decision: PolicyDecision(keyPath: [], reason: "no entry"), violations: [v])
        #expect(answer.blockStatus == 403)
        #expect(!answer.headers.contains { $0.0 == "X-ATS-SSL-Error" })
        #expect(answer.blockBody.contains("set NSExceptionAllowsInsecureHTTPLoads = YES"))
        #expect(answer.headers.contains { $0 == ("X-ATS-Rule", "NSAppTransportSecurity (defaults)") })
    }

    @Test("The body explains the violation, the app's NSError and the fix, or says no exception helps")
    func body() {
        let mismatch = ATSViolation(
            kind: .hostnameMismatch, urlError: .serverCertificateUntrusted, sslError: .hostNameMismatch,
            explanation: "certificate names other.test, not old.test",
            fix: .noExceptionCanHelp(reason: "a hostname mismatch fails even with NSAllowsArbitraryLoads"))
        let body = ATSAnswer(url: "https://old.test/", decision: decision, violations: [version, mismatch]).blockBody
        #expect(body.contains("Violation 1: server negotiated TLS 1.0"))
        #expect(body.contains("Error Domain=NSURLErrorDomain Code=-1200"))
        #expect(body.contains("set NSExceptionMinimumTLSVersion = TLSv1.0"))
        #expect(body.contains("No Info.plist exception can allow this"))
    }

    @Test("The rule's notes are set apart as how the simulation reads Apple, and left out where no verdict was made")
    func notesAreSetApart() {
        let noted = PolicyDecision(keyPath: decision.keyPath, reason: decision.reason, notes: ["EKU reading"])
        let body = ATSAnswer(url: "https://old.test/", decision: noted, violations: [version]).blockBody
        #expect(body.contains(
            "How ATSProxy reads Apple's behaviour where it is unconfirmed (for every connection under this rule):\n"
                + "  Note: EKU reading\n"))
        let unreachable = ATSViolation(
            kind: .unreachable, urlError: .cannotConnectToHost, sslError: nil, explanation: "connection refused",
            fix: .noExceptionCanHelp(reason: "start the server"))
        let failed = ATSAnswer(url: "https://old.test/", decision: noted, violations: [unreachable]).blockBody
        #expect(!failed.contains("EKU reading"))
    }

    @Test("A --block tls fallback answer says why the client got HTTP rather than the app's failed handshake")
    func fallbackBody() {
        var answer = ATSAnswer(url: "https://old.test/", decision: decision, violations: [version])
        #expect(!answer.blockBody.contains("Why an HTTP answer"))
        answer.acceptedFlaw = "valid for 900 days"
        #expect(answer.blockBody.hasSuffix(
            "carries the server's flaw (valid for 900 days), because its TLS library does not check that, or its "
                + "checks are off. The app's TLS stack checks it: the app fails in the handshake.\n"))
    }

    @Test("Header values are forced to printable ASCII")
    func asciiOnly() {
        #expect(ATSAnswer.ascii("a›b\r\nc") == "a?b??c")
    }
}

@Suite("Proxy options")
struct ProxyOptionsTests {
    @Test("--map parses host, address and port, including bracketed IPv6")
    func mapping() throws {
        let m = try HostMapping(parsing: "API.example.com=127.0.0.1:8443")
        #expect(m.pattern.description == "api.example.com" && m.address == "127.0.0.1" && m.port == 8443)
        let v6 = try HostMapping(parsing: "a.test=[::1]:9000")
        #expect(v6.address == "::1" && v6.port == 9000)
    }

    @Test("--map rejects a target without a port", arguments: ["a.test=127.0.0.1", "a.test", "=1.2.3.4:5", "a=:80", "a=h:99999"])
    func badMapping(_ text: String) {
        #expect(throws: ProxyOptionError.self) { try HostMapping(parsing: text) }
    }

    static let mapErrors: [(text: String, problem: String)] = [
        ("x.test=127.0.0.1", "the target needs a port (ADDR:PORT)"),
        ("x.test=127.0.0.1:99999", "the port 99999 is out of range (1–65535)"),
        ("x.test=127.0.0.1:0", "the port 0 is out of range (1–65535)"),
        ("x.test=127.0.0.1:99999999999999999999", "is out of range (1–65535)"),
        ("x.test=127.0.0.1:abc", "the port 'abc' is not a number"),
        ("x.test=127.0.0.1:-1", "the port '-1' is not a number"),
        ("x.test=127.0.0.1:", "the port is missing after ':' (ADDR:PORT)"),
        ("x.test=[::1]:", "the port is missing after ':'"),
        ("x.test=:443", "the target address is empty"),
        ("x.test=*.y.test:443", "the target must be an IP address or a host name, not a pattern such as '*.y.test'"),
        ("x.test=.y.test:443", "not a pattern such as '.y.test'"),
        ("x.test=a b:443", "the target must be an IP address or a host name: ' ' cannot appear in a host name"),
        ("x.test=::1:443", "an IPv6 address takes brackets before the port, as in [::1]:8443"),
        ("x.test=[::1:443", "the '[' of the IPv6 address is not closed"),
        ("x.test=[127.0.0.1]:443", "brackets hold an IPv6 address"),
    ]

    @Test("A bad --map target says what is wrong with it, naming the option and the whole value", arguments: mapErrors)
    func mapTargetErrors(_ row: (text: String, problem: String)) {
        #expect {
            try HostMapping(parsing: row.text)
        } throws: { error in
            let text = (error as? ProxyOptionError)?.description ?? ""
            return text.hasPrefix("--map '\(row.text)': ") && text.contains(row.problem)
        }
    }

    @Test("A --map target may be a host name, with or without a trailing dot, even one the resolver will refuse")
    func mapHostNameTarget() throws {
        let m = try HostMapping(parsing: "x.test=origin.local.:8443")
        #expect(m.address == "origin.local." && m.port == 8443)
        let unresolvable = String(repeating: "a", count: 70) + ".invalid"
        #expect(try HostMapping(parsing: "x.test=\(unresolvable):443").address == unresolvable)
    }

    @Test("Two --map values for the same pattern, in any case or trailing dot, are refused naming both")
    func duplicateMappings() throws {
        #expect {
            try HostMapping.parsingAll(["x.test=127.0.0.1:1", "y.test=127.0.0.1:3", "X.TEST.=127.0.0.1:2"])
        } throws: { error in
            (error as? ProxyOptionError)?.description
                == "--map 'x.test=127.0.0.1:1' and --map 'X.TEST.=127.0.0.1:2' both map x.test; "
                + "give each host one --map"
        }
        let distinct = try HostMapping.parsingAll(["x.test=127.0.0.1:1", "*.x.test=127.0.0.1:2", ".x.test=127.0.0.1:3"])
        #expect(distinct.map(\.port) == [1, 2, 3])
    }
}
