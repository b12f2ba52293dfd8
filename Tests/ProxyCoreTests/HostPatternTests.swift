import Testing

@testable import ProxyCore

@Suite("--passthrough and --map host patterns")
struct HostPatternTests {
    static func table(_ patterns: String...) throws -> HostPatternTable<String> {
        HostPatternTable(try patterns.map { (try HostPattern(parsing: $0, option: "--passthrough"), $0) })
    }

    static let wildcardRows: [(host: String, matches: Bool)] = [
        ("api.example.com", true),
        ("a.b.c.example.com", true),  // any depth
        ("API.Example.COM", true),  // any case
        ("api.example.com.", true),  // trailing dot
        ("example.com", false),  // not the apex
        ("badexample.com", false),
        ("example.com.evil.test", false),
        ("example.org", false),
    ]

    @Test("*.example.com covers every name below example.com at any depth, in any case, but not example.com itself",
          arguments: wildcardRows)
    func wildcard(_ row: (host: String, matches: Bool)) throws {
        let table = try Self.table("*.Example.com.")
        #expect((table.lookup(row.host) != nil) == row.matches)
    }

    @Test("An exact host covers only itself, whatever its case or trailing dot")
    func exact() throws {
        let table = try Self.table("API.example.com.")
        #expect(table.lookup("api.example.com")?.value == "API.example.com.")
        #expect(table.lookup("Api.Example.Com.") != nil)
        #expect(table.lookup("x.api.example.com") == nil)
        #expect(table.lookup("example.com") == nil)
    }

    @Test(".example.com covers example.com and every name below it")
    func dotted() throws {
        let table = try Self.table(".example.com")
        #expect(table.lookup("example.com") != nil)
        #expect(table.lookup("a.b.example.com") != nil)
        #expect(table.lookup("badexample.com") == nil)
    }

    @Test("The most specific pattern wins: the exact host, then the nearest parent's wildcard")
    func mostSpecific() throws {
        let table = try Self.table("*.example.com", "*.staging.example.com", "db.staging.example.com")
        #expect(table.lookup("db.staging.example.com")?.value == "db.staging.example.com")
        #expect(table.lookup("api.staging.example.com")?.value == "*.staging.example.com")
        #expect(table.lookup("staging.example.com")?.value == "*.example.com")
        #expect(table.lookup("www.example.com")?.value == "*.example.com")
    }

    @Test("IP literals match exactly, IPv6 in any spelling, with or without brackets; wildcards never match them")
    func ipLiterals() throws {
        let table = try Self.table("10.0.0.1", "[::1]", "*.0.0.1")
        #expect(table.lookup("10.0.0.1") != nil)
        #expect(table.lookup("0:0:0:0:0:0:0:1") != nil)
        #expect(table.lookup("[::1]") != nil)
        #expect(table.lookup("127.0.0.1") == nil)
    }

    static let badPatterns: [(text: String, problem: String)] = [
        ("", "the host is empty"),
        (".", "the host is empty"),
        ("*", "a wildcard must be the whole first label"),
        ("*.", "a wildcard must be the whole first label"),
        ("*x.com", "a wildcard must be the whole first label"),
        ("a.*.com", "a wildcard must be the whole first label"),
        ("*.*.com", "a wildcard must be the whole first label"),
        ("example.com:443", "a port is not part of a host"),
        ("*.example.com:8443", "a port is not part of a host"),
        ("https://example.com", "a scheme is not part of a host"),
        ("example.com/api", "a path is not part of a host"),
        ("10.0.0.0/8", "address ranges (CIDR) are not supported; name host names, *.domain wildcards or single IP"),
        ("fd00::/8", "address ranges (CIDR) are not supported"),
        ("a..example.com", "empty label"),
        ("exa mple.com", "' ' cannot appear in a host name"),
        ("..", "no domain follows the wildcard or leading dot"),
    ]

    @Test("Anything else is refused with an error naming the option and the value", arguments: badPatterns)
    func refused(_ row: (text: String, problem: String)) {
        #expect {
            try HostPattern(parsing: row.text, option: "--passthrough")
        } throws: { error in
            let text = (error as? ProxyOptionError)?.description ?? ""
            return text.hasPrefix("--passthrough '\(row.text)': ") && text.contains(row.problem)
        }
    }

    @Test("The same --passthrough pattern twice, in any case or trailing dot, is refused naming both values")
    func duplicatePassthrough() throws {
        #expect {
            try HostPattern.parsingAll(["x.test", "*.x.test", "X.TEST."], option: "--passthrough")
        } throws: { error in
            (error as? ProxyOptionError)?.description
                == "--passthrough 'x.test' and --passthrough 'X.TEST.' both name x.test; give each host once"
        }
        #expect {
            try HostPattern.parsingAll(["10.0.0.1", "[::1]", "0:0:0:0:0:0:0:1"], option: "--passthrough")
        } throws: { error in
            (error as? ProxyOptionError)?.description.hasPrefix("--passthrough '[::1]' and --passthrough '0:0") == true
        }
        let distinct = try HostPattern.parsingAll(["x.test", "*.x.test", ".x.test"], option: "--passthrough")
        #expect(distinct.map(\.description) == ["x.test", "*.x.test", ".x.test"])
    }

    @Test("--map takes the same patterns for HOST, and its errors quote the whole argument")
    func mapPatterns() throws {
        let wild = try HostMapping(parsing: "*.Staging.example.com=127.0.0.1:8443")
        #expect(wild.pattern.kind == .subdomains && wild.pattern.name == "staging.example.com")
        let table = HostPatternTable([(wild.pattern, wild)])
        #expect(table.lookup("api.staging.example.com")?.value.port == 8443)
        #expect(table.lookup("staging.example.com") == nil)
        #expect {
            try HostMapping(parsing: "*x.com=127.0.0.1:1")
        } throws: { error in
            (error as? ProxyOptionError)?.description.hasPrefix("--map '*x.com=127.0.0.1:1': a wildcard") == true
        }
        #expect(throws: ProxyOptionError.self) { try HostMapping(parsing: "a.test:443=127.0.0.1:1") }
    }
}
