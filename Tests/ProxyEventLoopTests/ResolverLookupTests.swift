import Testing

@testable import ProxyEventLoop

@Suite("getaddrinfo lookup")
struct ResolverLookupTests {
    /// `localhost` is in every /etc/hosts, so this exercises getaddrinfo without touching the network
    /// (`EventLoop.resolve` itself short-cuts `localhost`, hence the direct call).
    @Test func localhostResolvesToLoopback() throws {
        let addresses = try EventLoop.lookUp(host: "localhost", port: 80).get()
        #expect(!addresses.isEmpty)
        #expect(addresses.allSatisfy { ($0.host == "127.0.0.1" || $0.host == "::1") && $0.port == 80 })
    }
}
