import ATSPolicy
import Foundation
import TLSCore
import Testing

@testable import ProxyCore

@Suite("Playbooks: what the trace (--diagnostics 1) says of blocked and annotated TLS 1.0 connections")
struct TracePlaybooks {
    @Test("--block http: the app's task fails in the handshake: no request enqueued, the error names the request's URL")
    func blockHTTP() throws {
        let scene = try InterceptScene(block: .http, diagnosticsLevel: 1)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(tls10: true), now: scene.now)
        pb.connects(scene)
        pb.probesTLS10Origin()
        pb >> .originFlight
        pb << .log(.trace("TLS Handshake", containing: "protocol_version"))
        pb << .closeUpstream
        pb << .log(.trace("ATS Decision", containing: "blocked: every request answered 502"))
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)
        let url = "https://good.test/some/path?q=1"
        pb >> .client(sends: "GET /some/path?q=1 HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .log(.trace("LoaderWhatToDo", containing: url))
        pb << .log(.trace("Response Error", containing: "NSErrorFailingURLKey=\(url)"))
        pb << .sendToClient(.tls(.prefix("HTTP/1.1 502 Bad Gateway\r\n")))
        pb << .log(.trace("Did Fail", containing: "Code=-1200"))
        pb << .log(.exchange("GET", url, status: 502, .blocked, codes: "-1200/-9836"))
        pb.check()
    }

    @Test("--ats annotate: the decision says the connection is relayed although the app refuses it; the load finishes")
    func annotate() throws {
        let scene = try InterceptScene(mode: .annotate, diagnosticsLevel: 1)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(tls10: true), now: scene.now)
        pb.connects(scene)
        pb.probesTLS10Origin()
        pb >> .originFlight
        pb << .log(.trace("TLS Handshake", containing: "protocol_version"))
        pb << .log(.trace("ATS Decision", containing: "annotated: relayed, although the app refuses this connection"))
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb >> .clientFlight
        pb << .sendToClient(.tlsRecords)
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .log(.trace("LoaderWhatToDo"))
        pb << .log(.trace("Protocol Enqueue"))
        pb << .sendToUpstream(.tls("GET / HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")
        pb << .sendToClient(.tls(.containing(["HTTP/1.1 200 OK\r\n", "X-ATS-Verdict: violation\r\n"])))
        pb << .log(.trace("Protocol Received"))
        pb << .log(.trace("Did Finish"))
        pb << .log(.exchange("GET", "https://good.test/", status: 200, .violation, codes: "-1200/-9836"))
        pb.check()
    }
}
