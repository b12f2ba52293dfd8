import ATSPolicy
import Testing

@testable import ProxyCore

/// Issue 30, items 7 and 11, as the session's commands show them for a plain-HTTP request.
@Suite("Playbooks: h2c upgrades and cut responses")
struct HygienePlaybooks {
    @Test("A close-delimited body the origin resets: the exchange is logged cut off and the client's connection reset")
    func resetCutsTheResponse() throws {
        let pb = Playbook(try SessionHarness.environment(exceptionAllowingHTTP: "media.test"))
        pb >> .clientBytes(bytes("GET http://media.test/cut HTTP/1.1\r\nHost: media.test\r\n\r\n"))
        pb << .startTimer(.requestHead)
        pb << .connectUpstream(address: "media.test", port: 80)
        pb >> .upstreamConnected
        pb << .sendToUpstream("GET /cut HTTP/1.1\r\nHost: media.test\r\n\r\n")
        pb << .startTimer(.response)
        pb >> .upstreamBytes(bytes("HTTP/1.1 200 OK\r\n\r\npartial"))
        pb << .sendToClient("HTTP/1.1 200 OK\r\n\r\npartial")
        pb >> .upstreamClosed(error: "Connection reset by peer")
        pb << .log(.exchange("cut off by the origin's reset") {
            $0.status == 200 && $0.interruption == "the upstream connection failed: Connection reset by peer"
        })
        pb << .exactly(.resetClient)
        pb.check()
    }

    @Test("An h2c upgrade goes up without Upgrade and HTTP2-Settings; an origin's 101 anyway is answered 502")
    func h2cUpgradeStripped() throws {
        let pb = Playbook(try SessionHarness.environment(exceptionAllowingHTTP: "media.test"))
        pb >> .clientBytes(bytes(
            "GET http://media.test/ HTTP/1.1\r\nHost: media.test\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                + "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n"))
        pb << .startTimer(.requestHead)
        pb << .connectUpstream(address: "media.test", port: 80)
        pb >> .upstreamConnected
        pb << .sendToUpstream("GET / HTTP/1.1\r\nHost: media.test\r\n\r\n")
        pb << .startTimer(.response)
        pb >> .upstreamBytes(bytes("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"))
        pb << .sendToClient(.prefix("HTTP/1.1 502 "))
        pb << .log(.exchange("GET", "http://media.test/", status: 502, .allowed, codes: nil))
        pb << .exactly(.closeUpstream)
        pb << .exactly(.closeClient)
        pb.check()
    }
}
