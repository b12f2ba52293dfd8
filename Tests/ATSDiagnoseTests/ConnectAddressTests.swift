import ATSDiagnose
import Testing

struct ConnectAddressTests {
    @Test(
        "ADDR keeps the URL's port, ADDR:PORT replaces it; IPv6 bare or in brackets",
        arguments: [
            ("127.0.0.1", "127.0.0.1", nil), ("127.0.0.1:8443", "127.0.0.1", 8443),
            ("localhost:443", "localhost", 443), ("origin.test", "origin.test", nil), ("::1", "::1", nil),
            ("[::1]", "::1", nil), ("[::1]:8443", "::1", 8443), ("[2001:db8::1]:1", "2001:db8::1", 1),
            ("fe80::1%lo", "fe80::1%lo", nil),
        ] as [(String, String, Int?)])
    func parses(text: String, host: String, port: Int?) throws {
        #expect(try ConnectAddress(parsing: text) == ConnectAddress(host: host, port: port))
    }

    @Test(
        "malformed values are refused with the reason",
        arguments: [
            ("", "the address is empty"), (":8443", "the address is empty"),
            ("127.0.0.1:", "the port must be a number from 1 to 65535"),
            ("127.0.0.1:0", "the port must be a number from 1 to 65535"),
            ("127.0.0.1:65536", "the port must be a number from 1 to 65535"),
            ("127.0.0.1:+80", "the port must be a number from 1 to 65535"),
            ("127.0.0.1:https", "the port must be a number from 1 to 65535"),
            ("[::1", "the '[' is not closed"), ("[::1]8443", "only ':PORT' may follow ']'"),
            ("[]:8443", "'' is not an IPv6 address"), ("[127.0.0.1]:8443", "'127.0.0.1' is not an IPv6 address"),
            ("https://127.0.0.1:8443", "is neither HOST:PORT nor an IPv6 address"),
            ("a:b:c", "is neither HOST:PORT nor an IPv6 address"),
            ("host/path", "'host/path' is not a host name or IP address"),
        ])
    func refuses(text: String, reason: String) {
        #expect {
            try ConnectAddress(parsing: text)
        } throws: { error in
            guard let error = error as? DiagnoseError, case .invalidConnectAddress(let message) = error else {
                return false
            }
            return message.hasPrefix("--connect-to \(text): ") && message.contains(reason)
                && message.hasSuffix("expected ADDR or ADDR:PORT (IPv6 in brackets: [::1]:8443)")
        }
    }
}
