import ATSPolicy
import Foundation
import TLSCore
import Testing

@testable import ProxyCore

@Suite("Playbooks: how a connection ends")
struct ConnectionEndPlaybooks {
    /// OpenSSL 3 answered a FIN without close_notify with a fatal decode_error alert, which the proxy sent on to a
    /// client that did nothing wrong (found by the playbooks).
    @Test("A client that ends its side with a FIN after its exchange gets a close_notify, not a fatal alert")
    func finWithoutCloseNotify() throws {
        let scene = try InterceptScene(mode: .annotate)
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET / HTTP/1.1\r\nHost: good.test\r\n\r\n")
        pb << .sendToUpstream(.tls("GET / HTTP/1.1\r\nHost: good.test\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 204 No Content\r\n\r\n")
        pb << .sendToClient(.tls(.prefix("HTTP/1.1 204 No Content\r\n")))
        pb << .log(.exchange("GET", "https://good.test/", status: 204, .allowed, codes: nil))
        pb >> .clientEOF
        pb << .sendToClient(.tlsRecords)
        pb << .closeClient
        pb << .closeUpstream
        pb.check()
        #expect(pb.client?.failure == nil, "the proxy's last record to the client")
        #expect(pb.client?.engine.lastAlertReceived?.alert == .closeNotify)
    }
}

@Suite("Playbooks: the flawed leaf is the upstream's flaw")
struct WrongHostLeafPlaybooks {
    /// It always named `wrong.host.invalid` (found by the playbooks).
    @Test("--block tls for a leaf issued for another name serves the client a leaf of that other name")
    func wrongHostLeafNamesTheOriginsName() throws {
        let scene = try InterceptScene()
        let pb = Playbook(scene.env, client: try scene.client(),
                          origin: try scene.origin(leaf: .wrongHost("other.test")), now: scene.now)
        pb.connects(scene)
        pb >> .originFlight
        pb << .sendToUpstream(.tlsRecords)
        pb << .closeUpstream
        pb << .startTimer(.clientHandshake)
        pb << .sendToClient(.tlsRecords)
        pb.check()
        #expect(pb.client?.servedLeaf?.facts.dnsNames == ["other.test"])
    }
}
