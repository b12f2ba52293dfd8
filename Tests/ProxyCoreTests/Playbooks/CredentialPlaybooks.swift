import Testing

@testable import ProxyCore

@Suite("Playbooks: the proxy's credentials never go upstream")
struct CredentialPlaybooks {
    @Test("Proxy-Authorization sent inside an intercepted tunnel is removed; the rest of the head goes as sent")
    func insideTheTunnel() throws {
        let scene = try InterceptScene()
        let pb = Playbook(scene.env, client: try scene.client(), origin: try scene.origin(), now: scene.now)
        pb.connects(scene)
        pb.completesHandshakes()
        pb >> .client(sends: "GET /a HTTP/1.1\r\nHost: good.test\r\nProxy-Authorization: Basic cWE6czNjcmV0\r\n"
            + "Accept: */*\r\n\r\n")
        pb << .sendToUpstream(.tls("GET /a HTTP/1.1\r\nHost: good.test\r\nAccept: */*\r\n\r\n"))
        pb << .startTimer(.response)
        pb >> .origin(sends: "HTTP/1.1 204 No Content\r\n\r\n")
        pb << .sendToClient(.tls(.containing(["HTTP/1.1 204 No Content\r\n"])))
        pb << .log(.exchange("GET", "https://good.test/a", status: 204, .allowed, codes: nil))
        pb.check()
    }
}
