import ATSPolicy
import Foundation
import TLSCore
import Testing

@testable import ProxyCore

@Suite("Playbooks: --ats annotate relays and says on each response what the app would have done")
struct AnnotatePlaybooks {
    @Test("A TLS 1.0-only origin: its real 200 is relayed with X-ATS-Verdict and X-ATS-Error")
    func tls10() throws {
        let scene = try InterceptScene(mode: .annotate)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(tls10: true), now: scene.now)
        pb.connects(scene)
        pb.probesTLS10Origin()
        pb >> .originFlight
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET / HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")
        pb << .sendToClient(.tls(.containing([
            "HTTP/1.1 200 OK\r\n", "X-ATS-Verdict: violation\r\n",
            "X-ATS-Error: -1200 NSURLErrorSecureConnectionFailed\r\n", "X-ATS-SSL-Error: -9836 ", "\r\n\r\nhello\n",
        ])))
        pb << .log(.exchange("GET", "https://good.test/", status: 200, .violation, codes: "-1200/-9836"))
        pb.check()
        #expect(pb.client?.receivedText.hasSuffix("\r\n\r\nhello\n") == true)
    }

    @Test("An allowed origin: the 200 says allowed, with no error")
    func allowed() throws {
        let scene = try InterceptScene(mode: .annotate)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET / HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 204 No Content\r\n\r\n")
        pb << .sendToClient(.tls(.containing(["HTTP/1.1 204 No Content\r\n", "X-ATS-Verdict: allowed\r\n"],
                                              excluding: ["X-ATS-Error"])))
        pb << .log(.exchange("GET", "https://good.test/", status: 204, .allowed, codes: nil))
        pb.check()
    }

    @Test("A cleartext request is forwarded; its response says -1022 and why")
    func cleartext() throws {
        let env = try SessionHarness.environment(mode: .annotate)
        let pb = Playbook(env)
        pb >> .clientBytes(bytes("GET http://plain.test/bytes/10 HTTP/1.1\r\nHost: plain.test\r\n\r\n"))
        pb << .startTimer(.requestHead)
        pb << .connectUpstream(address: "plain.test", port: 80)
        pb >> .upstreamConnected
        pb << .sendToUpstream(.prefix("GET /bytes/10 HTTP/1.1\r\n"))
        pb << .startTimer(.response)
        pb >> .upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .sendToClient(.containing([
            "HTTP/1.1 200 OK\r\n", "X-ATS-Verdict: violation\r\n", "X-ATS-Error: -1022 ",
            "X-ATS-Violation: cleartextNotAllowed: cleartext http:// load of plain.test: ATS requires a secure "
                + "connection to this host\r\n",
            "\r\n\r\nok",
        ]))
        pb << .log(.exchange("GET", "http://plain.test/bytes/10", status: 200, .violation, codes: "-1022"))
        pb.check()
    }
}
