import Testing

@testable import atsproxy_load

@Suite("LoadTarget and LoadPlan")
struct LoadTargetTests {
    @Test("URLs: default ports, paths, queries and IPv6 literals")
    func parsing() throws {
        let https = try LoadTarget(url: "https://Bench.Test/1k")
        #expect(https.scheme == .https && https.host == "bench.test" && https.port == 443 && https.path == "/1k")
        #expect(https.hostHeader == "bench.test" && https.authority == "bench.test:443")
        let http = try LoadTarget(url: "http://127.0.0.1:8080?x=1")
        #expect(http.path == "/?x=1" && http.hostHeader == "127.0.0.1:8080" && http.hostIsIPLiteral)
        let v6 = try LoadTarget(url: "https://[::1]:8443")
        #expect(v6.host == "::1" && v6.port == 8443 && v6.path == "/" && v6.authority == "[::1]:8443")
        #expect(v6.hostIsIPLiteral)
        #expect(!(try LoadTarget(url: "https://1.2.3.example/")).hostIsIPLiteral)
    }

    @Test("URLs the client refuses", arguments: [
        "bench.test/1k", "ftp://bench.test/", "https://user@bench.test/", "https://bench.test/#top",
        "https://bench.test:0/", "https://bench.test:70000/", "https://:443/", "https://bench.test/a b",
    ])
    func refused(url: String) {
        #expect(throws: LoadUsageError.self) { try LoadTarget(url: url) }
    }

    @Test("Host names are not resolved: direct runs need an IP address or --connect-to")
    func destinations() throws {
        func plan(_ url: String, proxy: String? = nil, connectTo: String? = nil) throws -> LoadPlan {
            try LoadPlan(
                url: url, proxy: proxy, connectTo: connectTo, connections: 5, requests: 11, threads: 2,
                timeout: .seconds(1), maxErrors: 0)
        }
        #expect(throws: LoadUsageError.self) { try plan("https://bench.test/") }
        #expect(try plan("https://bench.test/", connectTo: "127.0.0.1:8443").destination.description == "127.0.0.1:8443")
        #expect(try plan("https://bench.test/", proxy: "[::1]:3128").destination.description == "[::1]:3128")
        #expect(throws: LoadUsageError.self) { try plan("https://bench.test/", proxy: "127.0.0.1") }
        let split = try plan("http://127.0.0.1/")
        #expect((0..<2).map { split.assignment(forLoop: $0).requests } == [6, 5])
        #expect((0..<2).map { split.assignment(forLoop: $0).connections } == [3, 2])
    }
}
