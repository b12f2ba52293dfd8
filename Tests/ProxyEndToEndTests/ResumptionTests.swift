import Foundation
import Testing

/// The handshake facts of a `tlsHandshake` event without the time they were taken.
private func factsWithoutTime(_ event: [String: Any]) -> NSDictionary {
    var facts = event["handshake"] as? [String: Any] ?? [:]
    facts["observedAt"] = nil
    return facts as NSDictionary
}

/// A verdict as the `atsDecision` event states it.
private func verdict(_ event: [String: Any]) -> NSDictionary {
    ["decision": event["decision"] ?? NSNull(), "violations": event["violations"] ?? NSNull(),
     "message": event["message"] ?? NSNull()] as NSDictionary
}

@Suite("TLS session resumption (upstream and client legs)")
struct ResumptionTests {
    @Test("A second connection to an origin resumes the upstream session: same bytes, same verdict, and the trace says so")
    func secondConnectionResumes() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let log = folder.appendingPathComponent("events.jsonl")
        let stage = try await Stage(["--diagnostics", "1", "--log-json", log.path])
        for _ in 0..<2 {
            let r = try await stage.curl(["https://\(Stage.httpsHost)/bytes/100000"])
            #expect(r.status == 200, "\(r.stderr)")
            #expect(try await stage.matchesAnnouncedChecksum(r))
        }
        let handshakes = try await jsonEvents(log, kind: "tlsHandshake", count: 2)
        #expect(handshakes.map { $0["sessionResumed"] as? Bool } == [false, true])
        // The resumed connection is judged on the facts the first one recorded (TLS 1.3 renegotiates the rest).
        #expect(factsWithoutTime(handshakes[0]) == factsWithoutTime(handshakes[1]))
        let decisions = try await jsonEvents(log, kind: "atsDecision", count: 2)
        #expect(decisions.map { $0["message"] as? String } == ["allowed", "allowed"])
        #expect(verdict(decisions[0]) == verdict(decisions[1]))
        let trace = try await stage.proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.contains("Session: resumed") ? text : nil
        }
        #expect(trace.components(separatedBy: "Session: full handshake").count == 2, "\(trace)")
        #expect(trace.components(separatedBy: "Session: resumed").count == 2, "\(trace)")
    }

    @Test("--upstream-resumption off: every upstream connection makes a full handshake")
    func resumptionOff() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let log = folder.appendingPathComponent("events.jsonl")
        let stage = try await Stage(["--diagnostics", "1", "--log-json", log.path, "--upstream-resumption", "off"])
        for _ in 0..<2 {
            let r = try await stage.curl(["https://\(Stage.httpsHost)/bytes/1000"])
            #expect(r.status == 200, "\(r.stderr)")
            #expect(try await stage.matchesAnnouncedChecksum(r))
        }
        let handshakes = try await jsonEvents(log, kind: "tlsHandshake", count: 2)
        #expect(handshakes.map { $0["sessionResumed"] as? Bool } == [false, false])
        let trace = try await stage.proxy.process.waitForOutput(stderr: true, timeout: .seconds(10)) { text in
            text.components(separatedBy: "Session: full handshake").count == 3 ? text : nil
        }
        #expect(!trace.contains("Session: resumed"))
    }

    @Test("An expired certificate stays blocked with the same codes when its session is resumed (--block http and tls)")
    func violatingOriginStaysBlocked() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        // At most TLS 1.2: the session is made inside the handshake, so even a connection blocked right after its
        // handshake leaves one to resume.
        let origin = try await Origin(e2e, tls: "expired", tls12: true, in: folder)
        let httpLog = folder.appendingPathComponent("http.jsonl")
        let httpProxy = try await Proxy(
            e2e, origin.map("expired.test") + ["--block", "http", "--log-json", httpLog.path], in: folder)
        for _ in 0..<2 {
            let r = try await curl(["-x", httpProxy.url, "--cacert", e2e.proxyCA, "https://expired.test/"], in: folder)
            #expect(r.status == 502, "\(r.stderr)")
            #expect(r.header("X-ATS-Error") == "-1202 NSURLErrorServerCertificateUntrusted")
            #expect(r.header("X-ATS-SSL-Error")?.hasPrefix("-9814 ") == true, "\(r.headerText)")
        }
        let handshakes = try await jsonEvents(httpLog, kind: "tlsHandshake", count: 2)
        #expect(handshakes.map { $0["sessionResumed"] as? Bool } == [false, true])
        #expect(factsWithoutTime(handshakes[0]) == factsWithoutTime(handshakes[1]))
        let decisions = try await jsonEvents(httpLog, kind: "atsDecision", count: 2)
        #expect(verdict(decisions[0]) == verdict(decisions[1]))

        let tlsLog = folder.appendingPathComponent("tls.jsonl")
        let tlsProxy = try await Proxy(
            e2e, origin.map("expired.test") + ["--block", "tls", "--log-json", tlsLog.path], in: folder)
        for _ in 0..<2 {
            let r = try await curl(["-x", tlsProxy.url, "--cacert", e2e.proxyCA, "https://expired.test/"], in: folder)
            #expect(r.exit == 60, "\(r.stderr)")
        }
        let blockedLines = try await tlsProxy.process.waitForOutput(timeout: .seconds(10)) { text -> [Substring]? in
            let lines = text.split(separator: "\n").filter { $0.hasPrefix("CONNECT https://expired.test") }
            return lines.count >= 2 ? lines : nil
        }
        #expect(blockedLines.allSatisfy { $0.contains("ATS BLOCKED -1202/-9814") }, "\(blockedLines)")
        let tlsHandshakes = try await jsonEvents(tlsLog, kind: "tlsHandshake", count: 2)
        #expect(tlsHandshakes.map { $0["sessionResumed"] as? Bool } == [false, true])
    }

    @Test("A TLS 1.0 origin is refused with the same codes on every connection")
    func tls10StaysBlocked() async throws {
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "tls10", tls10: true, in: folder)
        let proxy = try await Proxy(e2e, origin.map("tls10.test") + ["--block", "http"], in: folder)
        for _ in 0..<3 {
            let r = try await curl(["-x", proxy.url, "--cacert", e2e.proxyCA, "https://tls10.test/"], in: folder)
            #expect(r.status == 502, "\(r.stderr)")
            #expect(r.header("X-ATS-Error") == "-1200 NSURLErrorSecureConnectionFailed")
            #expect(r.header("X-ATS-SSL-Error") == "-9836 errSSLPeerProtocolVersion")
        }
    }

    @Test(
        "A client reconnecting resumes its session with the proxy, never on another host",
        arguments: ["1.3", "1.2-ticket", "1.2-id"])
    func clientLegResumes(tls: String) async throws {
        // Two hosts, each its own origin and minted leaf: the third connection offers good.test's session to
        // passthrough.test, which must make a full handshake and verify its own leaf.
        let e2e = try E2E.shared()
        let folder = try e2e.folder()
        let origin = try await Origin(e2e, tls: "good", in: folder)
        let other = try await Origin(e2e, tls: "passthrough", in: folder)
        let proxy = try await Proxy(e2e, origin.map("good.test") + other.map("passthrough.test"), in: folder)
        let r = try await pythonClient(e2e, proxy, ["resume", "good.test", "passthrough.test", tls], in: folder)
        let first = r["first"] as? [String: Any] ?? [:]
        let again = r["again"] as? [String: Any] ?? [:]
        let elsewhere = r["elsewhere"] as? [String: Any] ?? [:]
        #expect(first["resumed"] as? Bool == false, "\(r)")
        #expect(first["status"] as? Int == 200, "\(r)")
        #expect(again["resumed"] as? Bool == true, "\(r)")
        #expect(again["status"] as? Int == 200, "\(r)")
        #expect(again["version"] as? String == (tls == "1.3" ? "TLSv1.3" : "TLSv1.2"), "\(r)")
        #expect(elsewhere["resumed"] as? Bool == false, "\(r)")
        #expect(elsewhere["status"] as? Int == 200, "\(r)")
    }
}
