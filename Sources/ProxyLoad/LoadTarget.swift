/// The URL every request of a run asks for: `http://` or `https://`, a host (name, IPv4 or bracketed IPv6), an
/// optional port and a path with an optional query. User info and fragments are refused: a benchmark URL has none.
struct LoadTarget: Equatable, Sendable {
    enum Scheme: String, Sendable {
        case http, https

        var defaultPort: UInt16 { self == .http ? 80 : 443 }
    }

    var scheme: Scheme
    /// The host without IPv6 brackets, lowercased.
    var host: String
    var port: UInt16
    /// The origin-form request target: path and query, `/` when the URL has none.
    var path: String

    init(url: String) throws(LoadUsageError) {
        guard let schemeEnd = url.range(of: "://") else {
            throw LoadUsageError("the URL \(url) has no scheme (http:// or https://)")
        }
        guard let scheme = Scheme(rawValue: url[..<schemeEnd.lowerBound].lowercased()) else {
            throw LoadUsageError("the URL \(url) is neither http:// nor https://")
        }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let pathPart = rest[authorityEnd...]
        if pathPart.contains("#") { throw LoadUsageError("the URL \(url) has a fragment") }
        let authority = rest[..<authorityEnd]
        if authority.contains("@") { throw LoadUsageError("the URL \(url) has user info") }
        let (host, port) = try Self.splitHostPort(String(authority), defaultPort: scheme.defaultPort, what: "URL")
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        self.path = pathPart.isEmpty ? "/" : pathPart.hasPrefix("?") ? "/" + pathPart : String(pathPart)
        if path.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            throw LoadUsageError("the URL path must be percent-encoded ASCII without spaces")
        }
    }

    /// `host:port` as it appears in a CONNECT request and an absolute URL (IPv6 in brackets).
    var authority: String { "\(bracketedHost):\(port)" }

    /// The Host header: the port only when it is not the scheme's default, as browsers and curl send it.
    var hostHeader: String { port == scheme.defaultPort ? bracketedHost : authority }

    /// Whether the host is an IP literal (TLS then sends no SNI, as curl, Go and iOS do).
    var hostIsIPLiteral: Bool {
        if host.contains(":") { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { UInt8($0) != nil }
    }

    private var bracketedHost: String { host.contains(":") ? "[\(host)]" : host }

    /// Splits `host:port` (IPv6 in brackets); the port may be omitted when `defaultPort` is given.
    static func splitHostPort(_ text: String, defaultPort: UInt16?, what: String) throws(LoadUsageError) -> (
        String, UInt16
    ) {
        var host: Substring
        var portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw LoadUsageError("\(what) \(text): unclosed [") }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw LoadUsageError("\(what) \(text): junk after ]") }
                portText = after.dropFirst()
            }
        } else if let colon = text.lastIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { throw LoadUsageError("\(what) \(text): put an IPv6 address in brackets") }
        } else {
            host = text[...]
        }
        guard !host.isEmpty else { throw LoadUsageError("\(what) \(text) has no host") }
        let port: UInt16
        if let portText {
            guard let value = UInt16(portText), value > 0 else {
                throw LoadUsageError("\(what) \(text) has an invalid port")
            }
            port = value
        } else if let defaultPort {
            port = defaultPort
        } else {
            throw LoadUsageError("\(what) \(text) needs a port (ADDRESS:PORT)")
        }
        return (String(host), port)
    }
}

/// A command line the load client cannot run: the message says what to change.
struct LoadUsageError: Error, Equatable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
