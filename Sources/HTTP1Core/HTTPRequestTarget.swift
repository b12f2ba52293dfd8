/// The four forms of request-target (RFC 9112 §3.2), interpreted as a proxy needs them.
public enum HTTPRequestTarget: Equatable, Sendable {
    /// `/path?query`, sent to origin servers (and to a proxy by clients that are not proxy-aware).
    case origin(pathAndQuery: String)
    /// `http://host:port/path?query`, sent by clients that know they talk to a proxy.
    /// `port` is nil when the target names none; `pathAndQuery` is "/" when the target has no path.
    case absolute(scheme: String, host: String, port: Int?, pathAndQuery: String)
    /// `host:port`, used only by CONNECT.
    case authority(host: String, port: Int)
    /// `*`, used only by OPTIONS.
    case asterisk

    /// Interprets a raw request-target for the given method.
    ///
    /// IPv6 literals keep their brackets off: `http://[::1]:8080/` gives host `::1`.
    public init(parsing target: String, method: String) throws(HTTP1Error) {
        func bad(_ detail: String) -> HTTP1Error {
            HTTP1Error(.remote, .invalidTarget, status: 400, detail: "\(detail): \(target)")
        }
        if method == "CONNECT" {
            guard let (host, port) = Self.splitAuthority(Substring(target)), let port else {
                throw bad("CONNECT needs an authority-form target host:port")
            }
            self = .authority(host: host, port: port)
            return
        }
        if target == "*" {
            guard method == "OPTIONS" else { throw bad("asterisk-form is only valid for OPTIONS") }
            self = .asterisk
            return
        }
        if target.hasPrefix("/") {
            self = .origin(pathAndQuery: target)
            return
        }
        guard let schemeEnd = target.firstRange(of: "://") else { throw bad("unrecognised request-target form") }
        let scheme = target[..<schemeEnd.lowerBound].asciiLowercased()
        guard !scheme.isEmpty, scheme.utf8.allSatisfy({ HTTP1Syntax.isSchemeChar($0) }) else {
            throw bad("invalid scheme")
        }
        let rest = target[schemeEnd.upperBound...]
        let delimiters: Set<Character> = ["/", "?", "#"]
        let authorityEnd = rest.firstIndex(where: { delimiters.contains($0) }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        // Userinfo is not allowed in http(s) URIs sent on the wire (RFC 9110 §4.2.4).
        guard !authority.contains("@") else { throw bad("userinfo in request-target") }
        guard let (host, port) = Self.splitAuthority(authority) else { throw bad("invalid authority") }
        var path = String(rest[authorityEnd...])
        if let hash = path.firstIndex(of: "#") { path = String(path[..<hash]) }
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        self = .absolute(scheme: scheme, host: host, port: port, pathAndQuery: path)
    }

    /// Splits `host[:port]`, handling bracketed IPv6 literals. Returns nil when malformed.
    static func splitAuthority(_ authority: Substring) -> (String, Int?)? {
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return nil }
                portText = after.dropFirst()
            }
        } else {
            if let colon = authority.lastIndex(of: ":") {
                host = authority[..<colon]
                portText = authority[authority.index(after: colon)...]
            } else {
                host = authority
            }
            guard !host.contains(":") else { return nil }
        }
        guard !host.isEmpty, host.utf8.allSatisfy({ HTTP1Syntax.isHostChar($0) }) else { return nil }
        var port: Int?
        if let portText {
            guard !portText.isEmpty, portText.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let value = Int(portText), value <= 65535
            else { return nil }
            port = value
        }
        return (String(host), port)
    }
}
