import ATSPolicy
import Testing

@testable import ProxyCore

@Suite("Playbooks: http:// under --ats enforce")
struct CleartextPlaybooks {
    @Test("http:// to a host that needs TLS: 403 with -1022 and no SSL code, without connecting; the client may go on",
          arguments: ["plain.test", "PLAIN.Test"])
    func refused(_ host: String) throws {
        let pb = Playbook(try SessionHarness.environment(exceptionAllowingHTTP: "media.test"))
        pb >> .clientBytes(bytes("GET http://\(host)/bytes/10 HTTP/1.1\r\nHost: \(host)\r\n\r\n"))
        pb << .startTimer(.requestHead)
        pb << .sendToClient(.containing(
            ["HTTP/1.1 403 Forbidden\r\n",
             "X-ATS-Error: -1022 NSURLErrorAppTransportSecurityRequiresSecureConnection\r\n",
             "ATSProxy refused this request without connecting to the server"],
            excluding: ["X-ATS-SSL-Error"]))
        pb << .log(.exchange("GET", "http://\(host)/bytes/10", status: 403, .blocked, codes: "-1022"))
        pb.check()
    }

    @Test("The plist's exception host is forwarded, however its name is spelled",
          arguments: ["media.test", "MEDIA.TEST"])
    func exception(_ host: String) throws {
        let pb = Playbook(try SessionHarness.environment(exceptionAllowingHTTP: "media.test"))
        pb >> .clientBytes(bytes("GET http://\(host)/bytes/10 HTTP/1.1\r\nHost: \(host)\r\n\r\n"))
        pb << .startTimer(.requestHead)
        pb << .connectUpstream(address: host.lowercased(), port: 80)
        pb >> .upstreamConnected
        pb << .sendToUpstream(.prefix("GET /bytes/10 HTTP/1.1\r\n"))
        pb << .startTimer(.response)
        pb >> .upstreamBytes(bytes("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
        pb << .sendToClient("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        pb << .log(.exchange("GET", "http://\(host)/bytes/10", status: 200, .allowed, codes: nil))
        pb.check()
    }
}
