import ProxyTrace
import Testing

@testable import ProxyCore

/// The session's clock, moved by the test.
private final class Clock: @unchecked Sendable {
    var now: Double = 1_700_000_000
}

private let timeouts = ProxyEnvironment.Timeouts(client: .seconds(5), response: .seconds(7))

/// A plain-HTTP session forwarding to `media.test`, with a clock the test moves.
private func plainSession(_ clock: Clock) throws -> ProxySession {
    let env = try SessionHarness.environment(exceptionAllowingHTTP: "media.test", timeouts: timeouts)
    return ProxySession(id: 1, environment: env, now: { clock.now })
}

/// One exchange done on `session`, its upstream still open.
private func oneExchange(_ session: ProxySession) {
    _ = session.handle(.clientBytes(bytes("GET http://media.test/a HTTP/1.1\r\nHost: media.test\r\n\r\n")))
    _ = session.handle(.upstreamConnected)
    _ = session.handle(.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")))
}

@Suite("Deadlines after the first request head: heads, bodies, ClientHello, the upstream's answer")
struct DeadlineTests {
    @Test("A later request head on a keep-alive connection gets --client-timeout from its first byte, then 408")
    func keepAliveHeadDeadline() throws {
        let clock = Clock()
        let session = try plainSession(clock)
        oneExchange(session)
        let partial = session.handle(.clientBytes(bytes("GET http://media.test/b HTTP/1.1\r\nHo")))
        #expect(partial.contains(.startTimer(.requestHead, after: .seconds(5))))
        let late = session.handle(.timerFired(.requestHead))
        #expect(late.clientText.hasPrefix("HTTP/1.1 408 "))
        #expect(late.closesClient)
        #expect(late.exchanges.map(\.status) == [408])
        #expect(late.notices.contains { $0.contains("request head") && $0.contains("--client-timeout") })
    }

    @Test("A head deadline that fires after its head completed does nothing")
    func staleHeadDeadline() throws {
        let session = try plainSession(Clock())
        oneExchange(session)
        _ = session.handle(.clientBytes(bytes("GET http://media.test/b HTTP/1.1\r\nHo")))
        _ = session.handle(.clientBytes(bytes("st: media.test\r\n\r\n")))
        let stale = session.handle(.timerFired(.requestHead))
        #expect(stale.toClient.isEmpty)
        #expect(!stale.closesClient)
    }

    @Test("A request body is an inactivity limit: each byte restarts it; silence past it is answered 408")
    func bodyInactivity() throws {
        let clock = Clock()
        let session = try plainSession(clock)
        let started = session.handle(.clientBytes(bytes(
            "POST http://media.test/up HTTP/1.1\r\nHost: media.test\r\nContent-Length: 10\r\n\r\nab")))
        #expect(started.contains(.startTimer(.requestBody, after: .seconds(5))))
        _ = session.handle(.upstreamConnected)
        clock.now += 3
        _ = session.handle(.clientBytes(bytes("c")))
        clock.now += 2.5
        // 2.5 s since the last byte: waits for what is left rather than failing a client that makes progress.
        let early = session.handle(.timerFired(.requestBody))
        #expect(early.contains(.startTimer(.requestBody, after: .milliseconds(2500))))
        #expect(early.toClient.isEmpty)
        clock.now += 2.5
        let late = session.handle(.timerFired(.requestBody))
        #expect(late.clientText.hasPrefix("HTTP/1.1 408 "))
        #expect(late.closesClient)
        #expect(late.contains(.closeUpstream))
        #expect(late.exchanges.map(\.status) == [408])
        #expect(late.notices.contains { $0.contains("request body") && $0.contains("5.0 seconds") })
    }

    @Test("A body the proxy holds unread (a full upstream buffer) gets no 408 meanwhile; on release its full limit again")
    func heldClientSuspendsBodyDeadline() throws {
        let clock = Clock()
        let session = try plainSession(clock)
        _ = session.handle(.clientBytes(bytes(
            "POST http://media.test/up HTTP/1.1\r\nHost: media.test\r\nContent-Length: 10\r\n\r\nab")))
        _ = session.handle(.upstreamConnected)
        clock.now += 1
        _ = session.handle(.clientReadingHeld(true))
        clock.now += 10
        let held = session.handle(.timerFired(.requestBody))
        #expect(held.toClient.isEmpty)
        #expect(!held.closesClient)
        #expect(held.contains(.startTimer(.requestBody, after: .seconds(5))), "waits again while held")
        _ = session.handle(.clientReadingHeld(false))
        clock.now += 4
        // The relay restarted the body's clock at the release: 1 s of the limit is left, not 11 s overdue.
        let early = session.handle(.timerFired(.requestBody))
        #expect(early.toClient.isEmpty)
        #expect(early.contains(.startTimer(.requestBody, after: .seconds(1))))
        clock.now += 1
        let late = session.handle(.timerFired(.requestBody))
        #expect(late.clientText.hasPrefix("HTTP/1.1 408 "))
        #expect(late.exchanges.map(\.status) == [408])
    }

    @Test("A stalled body after the response started closes the connection and logs the exchange as cut off")
    func bodyInactivityAfterResponse() throws {
        let clock = Clock()
        let session = try plainSession(clock)
        _ = session.handle(.clientBytes(bytes(
            "POST http://media.test/up HTTP/1.1\r\nHost: media.test\r\nContent-Length: 10\r\n\r\nab")))
        _ = session.handle(.upstreamConnected)
        let early = session.handle(.upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")))
        #expect(early.clientText.hasPrefix("HTTP/1.1 200 "))
        clock.now += 6
        let late = session.handle(.timerFired(.requestBody))
        #expect(!late.clientText.contains("408"))
        #expect(late.closesClient)
        #expect(late.exchanges.first?.interruption?.contains("request body") == true)
    }

    @Test("An upstream that never answers: 504 with the app's -1001 in X-ATS-* fields, logged FAILED -1001")
    func responseTimeout() throws {
        let session = try plainSession(Clock())
        _ = session.handle(.clientBytes(bytes("GET http://media.test/slow HTTP/1.1\r\nHost: media.test\r\n\r\n")))
        let sent = session.handle(.upstreamConnected)
        #expect(sent.contains(.startTimer(.response, after: .seconds(7))))
        let late = session.handle(.timerFired(.response))
        let text = late.clientText
        #expect(text.hasPrefix("HTTP/1.1 504 Gateway Timeout\r\n"))
        #expect(text.contains("X-ATS-Error: -1001 NSURLErrorTimedOut\r\n"))
        #expect(text.contains("X-ATS-Verdict: unreachable\r\n"))
        #expect(text.contains("http://media.test/slow"))
        #expect(late.closesClient)
        let line = try #require(late.exchanges.first)
        #expect(line.status == 504)
        #expect(line.outcome == .failed)
        #expect(line.consoleLine(colour: false).contains("FAILED -1001"))
        #expect(late.notices.contains { $0.contains("--response-timeout") })
    }

    @Test("The response deadline does nothing once the upstream answered")
    func staleResponseDeadline() throws {
        let session = try plainSession(Clock())
        oneExchange(session)
        let stale = session.handle(.timerFired(.response))
        #expect(stale.isEmpty)
    }

    @Test("A client waiting for 100 Continue is the upstream's wait, not a stalled body")
    func expectContinueWaitsOnTheUpstream() throws {
        let session = try plainSession(Clock())
        _ = session.handle(.clientBytes(bytes(
            "PUT http://media.test/e HTTP/1.1\r\nHost: media.test\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")))
        let sent = session.handle(.upstreamConnected)
        #expect(sent.contains(.startTimer(.response, after: .seconds(7))))
        #expect(!sent.contains(.startTimer(.requestBody, after: .seconds(5))))
    }

    @Test("After CONNECT, a ClientHello that does not come within --client-timeout closes the connection")
    func clientHelloDeadline() throws {
        let env = try SessionHarness.environment(timeouts: timeouts)
        let session = SessionHarness.session(env)
        let connect = session.handle(.clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")))
        #expect(connect.contains(.startTimer(.clientHello, after: .seconds(5))))
        _ = session.handle(.clientBytes([0x16, 0x03, 0x01]))
        let late = session.handle(.timerFired(.clientHello))
        #expect(late.closesClient)
        #expect(late.notices.contains { $0.contains("good.test:443") && $0.contains("no TLS ClientHello") })
    }
}
