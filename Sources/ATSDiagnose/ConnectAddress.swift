import Foundation

/// Where `--connect-to` sends the connection: `ADDR` keeps the URL's port, `ADDR:PORT` replaces it (the form
/// `run --map` takes). An IPv6 literal takes brackets when a port follows (`[::1]:8443`); bare (`::1`) it never
/// has one.
public struct ConnectAddress: Sendable, Hashable {
    /// Host name or IP literal, without brackets.
    public var host: String
    /// nil: the URL's port.
    public var port: Int?

    /// An address taken as is, without the checks of `init(parsing:)`.
    public init(host: String, port: Int? = nil) {
        self.host = host
        self.port = port
    }

    /// Parses `ADDR`, `ADDR:PORT`, `[IPv6]`, `[IPv6]:PORT` or a bare IPv6 literal; the error says what is wrong.
    public init(parsing text: String) throws(DiagnoseError) {
        func invalid(_ why: String) -> DiagnoseError {
            .invalidConnectAddress(
                "--connect-to \(text): \(why); expected ADDR or ADDR:PORT (IPv6 in brackets: [::1]:8443)")
        }
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw invalid("the '[' is not closed") }
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if !rest.isEmpty {
                guard rest.first == ":" else { throw invalid("only ':PORT' may follow ']'") }
                portText = rest.dropFirst()
            }
            guard ConnectAddress.isIPv6(host) else { throw invalid("'\(host)' is not an IPv6 address") }
        } else if text.filter({ $0 == ":" }).count > 1 {
            host = text
            guard ConnectAddress.isIPv6(host) else {
                throw invalid("'\(text)' is neither HOST:PORT nor an IPv6 address")
            }
        } else if let colon = text.firstIndex(of: ":") {
            host = String(text[..<colon])
            portText = text[text.index(after: colon)...]
        } else {
            host = text
        }
        guard !host.isEmpty else { throw invalid("the address is empty") }
        if !host.contains(":") {
            let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: ".-_"))
            guard host.unicodeScalars.allSatisfy(allowed.contains) else {
                throw invalid("'\(host)' is not a host name or IP address")
            }
        }
        if let portText {
            guard portText.allSatisfy({ $0.isASCII && $0.isNumber }), let value = Int(portText),
                (1...65535).contains(value)
            else {
                throw invalid("the port must be a number from 1 to 65535")
            }
            port = value
        } else {
            port = nil
        }
    }

    /// `inet_pton` accepts it (a zone such as `%eth0` is left to the resolver).
    private static func isIPv6(_ text: String) -> Bool {
        let address = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? ""
        var buffer = in6_addr()
        return inet_pton(AF_INET6, address, &buffer) == 1
    }
}
