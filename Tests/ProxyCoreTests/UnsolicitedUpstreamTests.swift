import Testing

@testable import ProxyCore

/// A plain-HTTP session forwarding to `media.test` (allowed for cleartext), with one exchange done and its upstream
/// connection open. `afterFirst` is what the upstream sends after the first response's body, in the same read.
private func sessionAfterOneExchange(afterFirst: String = "") throws -> (ProxySession, [ProxyCommand]) {
    let session = SessionHarness.session(try SessionHarness.environment(exceptionAllowingHTTP: "media.test"))
    _ = session.handle(.clientBytes(bytes("GET http://media.test/a HTTP/1.1\r\nHost: media.test\r\n\r\n")))
    _ = session.handle(.upstreamConnected)
    let out = session.handle(.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + afterFirst)))
    return (session, out)
}

private let evil = "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Evil: 1\r\n\r\nEVIL"

@Suite("Upstream bytes nobody asked for: never served as the answer to the next request")
struct UnsolicitedUpstreamTests {
    @Test("A second response in the same read as the first closes the upstream; the next request gets a fresh one")
    func secondResponseInTheSameRead() throws {
        let (session, first) = try sessionAfterOneExchange(afterFirst: evil)
        #expect(first.clientText.hasSuffix("\r\n\r\nok"))
        #expect(!first.clientText.contains("EVIL"))
        #expect(first.contains(.closeUpstream))
        #expect(!first.closesClient)
        #expect(first.notices.contains { $0.contains("media.test:80") && $0.contains("no request outstanding") })

        let next = session.handle(.clientBytes(bytes("GET http://media.test/b HTTP/1.1\r\nHost: media.test\r\n\r\n")))
        #expect(next.connects.map(\.0) == ["media.test"])
        let sent = session.handle(.upstreamConnected)
        #expect(sent.upstreamText.hasPrefix("GET /b HTTP/1.1\r\n"))
        let answer = session.handle(.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood")))
        #expect(answer.clientText.hasSuffix("\r\n\r\ngood"))
        #expect(!answer.clientText.contains("EVIL"))
        #expect(answer.exchanges.map(\.status) == [200])
    }

    @Test("Unasked bytes on an idle connection close the upstream only; the client goes on over a new one")
    func responseOnAnIdleConnection() throws {
        let (session, _) = try sessionAfterOneExchange()
        let out = session.handle(.upstreamBytes(bytes(evil)))
        #expect(out.contains(.closeUpstream))
        #expect(!out.closesClient)
        #expect(out.toClient.isEmpty)
        #expect(out.notices.contains { $0.contains("media.test:80") })
        let next = session.handle(.clientBytes(bytes("GET http://media.test/b HTTP/1.1\r\nHost: media.test\r\n\r\n")))
        #expect(next.connects.count == 1)
    }

    @Test("Empty lines after a response are tolerated (RFC 9112 §2.2): the connection is kept")
    func strayLineBreaksAreNotAResponse() throws {
        let (session, out) = try sessionAfterOneExchange(afterFirst: "\r\n")
        #expect(!out.contains(.closeUpstream))
        #expect(out.notices.isEmpty)
        let next = session.handle(.clientBytes(bytes("GET http://media.test/b HTTP/1.1\r\nHost: media.test\r\n\r\n")))
        #expect(next.connects.isEmpty)
        #expect(next.upstreamText.hasPrefix("GET /b HTTP/1.1\r\n"))
    }

    @Test("A 101 to a request without Upgrade is answered 502 and logged, never turned into a raw tunnel")
    func unaskedSwitchingProtocols() throws {
        let session = SessionHarness.session(try SessionHarness.environment(exceptionAllowingHTTP: "media.test"))
        _ = session.handle(.clientBytes(bytes("GET http://media.test/a HTTP/1.1\r\nHost: media.test\r\n\r\n")))
        _ = session.handle(.upstreamConnected)
        let out = session.handle(.upstreamBytes(bytes(
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: raw\r\n\r\nRAW BYTES")))
        #expect(out.clientText.hasPrefix("HTTP/1.1 502 "))
        #expect(!out.clientText.contains("RAW BYTES"))
        #expect(!out.contains(.startTunnel))
        #expect(out.closesClient)
        #expect(out.contains(.closeUpstream))
        #expect(out.exchanges.map(\.status) == [502])
    }

    @Test("A 101 to a request that asked for the upgrade still switches to a raw relay")
    func askedSwitchingProtocols() throws {
        let session = SessionHarness.session(try SessionHarness.environment(exceptionAllowingHTTP: "media.test"))
        _ = session.handle(.clientBytes(bytes(
            "GET http://media.test/ws HTTP/1.1\r\nHost: media.test\r\nConnection: Upgrade\r\nUpgrade: raw\r\n\r\n")))
        _ = session.handle(.upstreamConnected)
        let out = session.handle(.upstreamBytes(bytes(
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: raw\r\n\r\nRAW BYTES")))
        #expect(out.clientText.hasPrefix("HTTP/1.1 101 "))
        #expect(out.clientText.hasSuffix("RAW BYTES"))
        #expect(out.contains(.startTunnel))
    }
}
