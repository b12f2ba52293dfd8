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
        // Scanned as UTF-8 (every delimiter is ASCII): Character-level searches cost more than the rest of relaying
        // a plain-HTTP request. UTF8View indices are String indices, so the slices below share the target's storage.
        let bytes = target.utf8
        guard let schemeEnd = Self.firstIndex(of: "://", in: bytes) else { throw bad("unrecognised request-target form") }
        let scheme = target[..<schemeEnd].asciiLowercased()
        guard !scheme.isEmpty, scheme.utf8.allSatisfy({ HTTP1Syntax.isSchemeChar($0) }) else {
            throw bad("invalid scheme")
        }
        let rest = target[bytes.index(schemeEnd, offsetBy: 3)...]
        let authorityEnd = rest.utf8.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
            ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        // Userinfo is not allowed in http(s) URIs sent on the wire (RFC 9110 §4.2.4).
        guard !authority.utf8.contains(UInt8(ascii: "@")) else { throw bad("userinfo in request-target") }
        guard let (host, port) = Self.splitAuthority(authority) else { throw bad("invalid authority") }
        var path = rest[authorityEnd...]
        if let hash = path.utf8.firstIndex(of: UInt8(ascii: "#")) { path = path[..<hash] }
        let pathAndQuery = path.isEmpty || path.utf8.first == UInt8(ascii: "?") ? "/" + path : String(path)
        self = .absolute(scheme: scheme, host: host, port: port, pathAndQuery: pathAndQuery)
    }

    /// Whether `text` is an authority as a request names its host: host[:port], an IPv6 literal in brackets, no
    /// userinfo, no list (the form a Host field and HTTP/2's `:authority` must have).
    public static func isValidAuthority(_ text: String) -> Bool {
        authorityParts(text.utf8[...]) != nil
    }

    /// Where `needle` (ASCII) first starts in `haystack`.
    private static func firstIndex(of needle: StaticString, in haystack: String.UTF8View) -> String.Index? {
        let wanted = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
        guard let first = wanted.first else { return nil }
        var i = haystack.startIndex
        while let candidate = haystack[i...].firstIndex(of: first) {
            if haystack[candidate...].starts(with: wanted) { return candidate }
            i = haystack.index(after: candidate)
        }
        return nil
    }

    /// Splits `host[:port]`, handling bracketed IPv6 literals. Returns nil when malformed.
    static func splitAuthority(_ authority: Substring) -> (String, Int?)? {
        authorityParts(authority.utf8).map { (String(authority[$0.host]), $0.port) }
    }

    /// Where the host of `host[:port]` lies in `bytes` (without an IPv6 literal's brackets) and its port; nil when
    /// malformed. On bytes, so that a parser can check a `Host` field without making strings of it.
    static func authorityParts<Bytes: BidirectionalCollection<UInt8>>(_ bytes: Bytes)
        -> (host: Range<Bytes.Index>, port: Int?)?
    {
        var host: Range<Bytes.Index>
        var portBytes: Bytes.SubSequence?
        if bytes.first == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            host = bytes.index(after: bytes.startIndex)..<close
            let after = bytes[bytes.index(after: close)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { return nil }
                portBytes = after.dropFirst()
            }
            guard bytes[host].allSatisfy({ HTTP1Syntax.isHostChar($0) }) else { return nil }
        } else {
            // One pass (a parser checks every request's Host): host characters and at most one colon. The host
            // characters other than the colon are token characters; the port's are checked as digits below.
            var colon: Bytes.Index?
            var i = bytes.startIndex
            while i != bytes.endIndex {
                if bytes[i] == UInt8(ascii: ":") {
                    guard colon == nil else { return nil }
                    colon = i
                } else if !HTTP1Syntax.isToken(bytes[i]) {
                    return nil
                }
                bytes.formIndex(after: &i)
            }
            host = bytes.startIndex..<(colon ?? bytes.endIndex)
            if let colon { portBytes = bytes[bytes.index(after: colon)...] }
        }
        guard !host.isEmpty else { return nil }
        var port: Int?
        if let portBytes {
            guard !portBytes.isEmpty, portBytes.count <= 5 else { return nil }
            var value = 0
            for byte in portBytes {
                guard byte >= 0x30 && byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            guard value <= 65535 else { return nil }
            port = value
        }
        return (host, port)
    }
}
