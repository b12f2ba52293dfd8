import ATSPolicy
import Foundation
import ProxyTrace
import TLSCore
import Testing

@testable import ProxyCore

/// `--ats mirror`: nothing is blocked; the device is shown an upstream as weak as the real one and its own ATS
/// decides, which the connection's record says (docs/mirror.md).
@Suite("Playbooks: --ats mirror shows the device the upstream's weakness and records what it did")
struct MirrorPlaybooks {
    @Test("An expired origin leaf: the device is served an expired leaf, refuses it, and the CONNECT line says so")
    func deviceRefuses() throws {
        let scene = try InterceptScene(mode: .mirror)
        let at = Date(timeIntervalSince1970: scene.now)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(leaf: .expired(now: at)),
                          now: scene.now)
        pb.connects(scene)
        pb >> .originFlight
        pb << .sendToUpstream(.tlsRecords)
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        let served = try #require(pb.client?.servedLeaf?.facts)
        #expect(served.notAfter < at, "the device was served an expired leaf, as the origin's")
        pb >> .clientFlight
        pb << .log(.exchange("CONNECT https://good.test, mirrored: the device refused (certificate_expired)") { e in
            e.method == "CONNECT" && e.url == "https://good.test" && e.status == nil
                && e.consoleLine(colour: false).contains("leaf expired → device refused (certificate_expired)")
        })
        pb << .closeClient
        pb << .closeUpstream
        pb.check()
        #expect(pb.client?.failure != nil, "the device's own verification refused the leaf")
        #expect(pb.client?.received == [])
    }

    @Test("An expired origin leaf and a device that accepts it (curl -k): nothing is blocked, the request is relayed")
    func deviceAccepts() throws {
        let scene = try InterceptScene(mode: .mirror)
        let at = Date(timeIntervalSince1970: scene.now)
        let pb = Playbook(scene.env, client: try scene.insecureClient(),
                          origin: try scene.origin(leaf: .expired(now: at)), now: scene.now)
        let accepted = "leaf expired → device accepted TLSv1.3"
        pb.connects(scene)
        pb.completesHandshakes()
        // The device decided when it sent a request: that is the CONNECT line, and the request goes on.
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .log(.exchange("CONNECT https://good.test, mirrored: the device accepted") { e in
            e.method == "CONNECT" && e.status == nil && e.consoleLine(colour: false).contains(accepted)
        })
        pb << .sendToUpstream(.tls("GET / HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .sendToClient(.tls("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .log(.exchange("GET https://good.test/ 200, carrying the mirrored record") { e in
            e.url == "https://good.test/" && e.status == 200 && e.consoleLine(colour: false).contains(accepted)
        })
        pb.check()
    }
}
