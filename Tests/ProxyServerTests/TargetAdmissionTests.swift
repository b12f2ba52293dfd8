import ProxyEventLoop
import Testing

@testable import ProxyServer

@Suite("Which upstream addresses a client may reach through the proxy")
struct TargetAdmissionTests {
    func address(_ host: String, _ port: UInt16) throws -> SocketAddress {
        try SocketAddress(numericHost: host, port: port)
    }

    func admission(listening listeners: [SocketAddress], local: [String] = [], mapped: Set<String> = [])
        throws -> TargetAdmission
    {
        var admission = TargetAdmission(localAddresses: try local.map { try address($0, 0) }, mappedTargets: mapped)
        for listener in listeners { admission.addListener(listener) }
        return admission
    }

    @Test("The proxy's own loopback listener is refused in every spelling, for every client")
    func ownLoopbackListener() throws {
        let a = try admission(listening: [address("127.0.0.1", 8080)])
        for host in ["127.0.0.1", "::ffff:127.0.0.1", "0.0.0.0"] {
            let reason = a.refusal(target: try address(host, 8080), requested: host, clientIsLoopback: true)
            #expect(reason?.contains("own listening address") == true, "\(host): \(reason ?? "admitted")")
        }
        // Another port, or another loopback address the listener does not own, is not the proxy.
        #expect(a.refusal(target: try address("127.0.0.1", 8081), requested: "x", clientIsLoopback: true) == nil)
        #expect(a.refusal(target: try address("127.0.0.2", 8080), requested: "x", clientIsLoopback: true) == nil)
    }

    @Test("A wildcard listener is reached through loopback and every interface address")
    func wildcardListener() throws {
        let a = try admission(listening: [address("0.0.0.0", 8080)], local: ["192.0.2.10", "2001:db8::10"])
        for host in ["127.0.0.1", "127.9.9.9", "192.0.2.10", "::ffff:192.0.2.10", "0.0.0.0"] {
            #expect(a.refusal(target: try address(host, 8080), requested: host, clientIsLoopback: true) != nil, "\(host)")
        }
        #expect(a.refusal(target: try address("192.0.2.11", 8080), requested: "x", clientIsLoopback: true) == nil)
        let v6 = try admission(listening: [address("::", 8080)], local: ["2001:db8::10"])
        #expect(v6.refusal(target: try address("2001:db8::10", 8080), requested: "x", clientIsLoopback: true) != nil)
        #expect(v6.refusal(target: try address("::1", 8080), requested: "::1", clientIsLoopback: true) != nil)
    }

    @Test("A network client may not reach the proxy host's loopback, unless --map sends it there")
    func loopbackForNetworkClients() throws {
        let a = try admission(listening: [address("0.0.0.0", 8080)], mapped: ["127.0.0.1:8443"])
        for host in ["127.0.0.1", "::1", "::ffff:127.0.0.1", "0.0.0.0"] {
            let reason = a.refusal(target: try address(host, 6379), requested: host, clientIsLoopback: false)
            #expect(reason?.contains("loopback") == true, "\(host): \(reason ?? "admitted")")
            #expect(a.refusal(target: try address(host, 6379), requested: host, clientIsLoopback: true) == nil)
        }
        #expect(a.refusal(target: try address("127.0.0.1", 8443), requested: "127.0.0.1", clientIsLoopback: false)
            == nil)
        #expect(a.refusal(target: try address("198.51.100.7", 443), requested: "x", clientIsLoopback: false) == nil)
    }
}
