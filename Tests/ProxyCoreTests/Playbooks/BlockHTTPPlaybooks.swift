import ATSPolicy
import Foundation
import TLSCore
import Testing

@testable import ProxyCore

@Suite("Playbooks: --block http completes the client's handshake and answers every request 502 with the error")
struct BlockHTTPPlaybooks {
    @Test("A TLS 1.0-only origin: 502 with -1200/-9836, naming the request's URL; the next request gets it too")
    func tls10() throws {
        let scene = try InterceptScene(block: .http)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(tls10: true), now: scene.now)
        pb.connects(scene)
        pb.probesTLS10Origin()
        pb >> .originFlight
        pb << .closeUpstream
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)
        let url = "https://good.test/some/path?q=1"
        pb >> .client(sends: "GET /some/path?q=1 HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToClient(.tls(.containing([
            "HTTP/1.1 502 Bad Gateway\r\n", "X-ATS-Error: -1200 NSURLErrorSecureConnectionFailed\r\n",
            "X-ATS-SSL-Error: -9836 errSSLPeerProtocolVersion\r\n", "URL:  \(url)\n", "NSErrorFailingURLKey=\(url)",
        ])))
        pb << .log(.exchange("GET", url, status: 502, .blocked, codes: "-1200/-9836"))
        pb >> .client(sends: "GET /other HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToClient(.tls(.containing(["HTTP/1.1 502 Bad Gateway\r\n", "URL:  https://good.test/other\n"])))
        pb << .log(.exchange("GET", "https://good.test/other", status: 502, .blocked, codes: "-1200/-9836"))
        pb.check()
        #expect(pb.client?.failure == nil, "the client's handshake with the proxy's standard leaf succeeded")
    }

    @Test("A flawed origin leaf: the client gets a trusted leaf and 502 with -1202 and the flaw's SSL code",
          arguments: LeafFlaw.all)
    func flawedLeaf(_ flaw: LeafFlaw) throws {
        let scene = try InterceptScene(block: .http)
        let at = Date(timeIntervalSince1970: scene.now)
        let pb = Playbook(
            scene.env, client: try scene.client(), origin: try scene.origin(leaf: flaw.origin(at)), now: scene.now)
        pb.connects(scene)
        pb >> .originFlight
        pb << .sendToUpstream(.tlsRecords)
        pb << .closeUpstream
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToClient(.tls(.containing([
            "HTTP/1.1 502 Bad Gateway\r\n", "X-ATS-Error: -1202 NSURLErrorServerCertificateUntrusted\r\n",
            "X-ATS-SSL-Error: \(flaw.sslCode) ",
        ])))
        pb << .log(.exchange("GET", "https://good.test/", status: 502, .blocked, codes: "-1202/\(flaw.sslCode)"))
        pb.check()
        let served = try #require(pb.client?.servedLeaf?.facts)
        #expect(!flaw.served(served, at), "the client's leaf does not carry the flaw")
        #expect(pb.client?.failure == nil)
    }

    @Test("An unreachable origin: 502 -1004 naming the mapping, not an ATS verdict")
    func unreachable() throws {
        let scene = try InterceptScene()
        let pb = Playbook(scene.env, client: try scene.client(), now: scene.now)
        pb >> .clientBytes(scene.connect)
        pb << .startTimer(.requestHead)
        pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        pb << .startTimer(.clientHello)
        pb >> .clientFlight
        pb << .connectUpstream(address: "127.0.0.1", port: 9443)
        pb >> .upstreamConnectFailed(error: "Connection refused", failure: .cannotConnect)
        pb << .log(.notice(containing: "cannot connect upstream: Connection refused"))
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToClient(.tls(.containing([
            "HTTP/1.1 502 Bad Gateway\r\n", "X-ATS-Error: -1004 NSURLErrorCannotConnectToHost\r\n",
            "X-ATS-Verdict: unreachable\r\n", "ATSProxy could not reach the server", "(mapped to 127.0.0.1:9443)",
        ])))
        pb << .log(.exchange("GET", "https://good.test/", status: 502, .failed, codes: "-1004"))
        pb.check()
    }

    @Test("An origin that accepts and never answers: at the handshake deadline, 502 -1001")
    func silentOrigin() throws {
        let scene = try InterceptScene()
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.advance(15)
        pb >> .timerFired(.upstreamHandshake)
        pb << .log(.notice(containing: "no TLS handshake from the server within 15.0 seconds"))
        pb << .closeUpstream
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)
        pb >> .client(sends: "GET /x HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToClient(.tls(.containing([
            "HTTP/1.1 502 Bad Gateway\r\n", "X-ATS-Error: -1001 NSURLErrorTimedOut\r\n",
            "X-ATS-Verdict: unreachable\r\n",
        ])))
        pb << .log(.exchange("GET", "https://good.test/x", status: 502, .failed, codes: "-1001"))
        pb.check()
    }
}
