import HTTP1Core

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
        // HTTP1Core reads the URL as a proxy reads an absolute-form request target; the client adds what a benchmark
        // URL must not have besides (a fragment, port 0, a path that would need encoding).
        if url.contains("#") { throw LoadUsageError("the URL \(url) has a fragment") }
        let parsed: HTTPRequestTarget
        do { parsed = try HTTPRequestTarget(parsing: url, method: "GET") } catch {
            throw LoadUsageError("the URL \(url) is not an absolute http:// or https:// URL: \(error.detail)")
        }
        guard case .absolute(let schemeName, let host, let port, let path) = parsed else {
            throw LoadUsageError("the URL \(url) is not an absolute http:// or https:// URL")
        }
        guard let scheme = Scheme(rawValue: schemeName) else {
            throw LoadUsageError("the URL \(url) is neither http:// nor https://")
        }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = try Self.validPort(port, default: scheme.defaultPort, in: url)
        self.path = path
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

    /// Splits `host:port` (IPv6 in brackets), read as a CONNECT authority; the port is required.
    static func splitHostPort(_ text: String, what: String) throws(LoadUsageError) -> (String, UInt16) {
        let parsed: HTTPRequestTarget
        do { parsed = try HTTPRequestTarget(parsing: text, method: "CONNECT") } catch {
            throw LoadUsageError("\(what) \(text) is not ADDRESS:PORT (IPv6 in brackets): \(error.detail)")
        }
        guard case .authority(let host, let port) = parsed else {
            throw LoadUsageError("\(what) \(text) is not ADDRESS:PORT")
        }
        return (host, try validPort(port, default: nil, in: text))
    }

    /// A port from 1 to 65535 (the parser already refused anything above); port 0 is nobody's.
    private static func validPort(_ port: Int?, default defaultPort: UInt16?, in text: String) throws(LoadUsageError)
        -> UInt16
    {
        guard let port else {
            guard let defaultPort else { throw LoadUsageError("\(text) needs a port") }
            return defaultPort
        }
        guard port > 0, let value = UInt16(exactly: port) else { throw LoadUsageError("\(text) has an invalid port") }
        return value
    }
}

/// A command line the load client cannot run: the message says what to change.
struct LoadUsageError: Error, Equatable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
