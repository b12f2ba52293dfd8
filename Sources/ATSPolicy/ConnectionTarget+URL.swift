/// Why a string could not be read as a URL for `explain`.
public struct URLTargetError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text that was given.
    public let url: String
    /// What is wrong with it.
    public let problem: String
    public var description: String { "\(url): \(problem)" }
}

extension ConnectionTarget {
    /// Reads `scheme://[user@]host[:port][/path]` (IPv6 in brackets). Only the parts ATS looks at are kept; the
    /// host is kept exactly as written, since exception keys are matched by exact string (reference §2.2).
    public init(parsing url: String) throws(URLTargetError) {
        guard let sep = url.firstRange(of: "://") else {
            throw URLTargetError(url: url, problem: "not a URL (expected scheme://host, e.g. https://example.com)")
        }
        let scheme = url[..<sep.lowerBound].lowercased()
        guard ["http", "https", "ws", "wss"].contains(scheme) else {
            throw URLTargetError(url: url, problem: "scheme \(scheme) is not one ATS governs (http, https, ws, wss)")
        }
        var rest = url[sep.upperBound...]
        if let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) { rest = rest[..<end] }
        if let at = rest.lastIndex(of: "@") { rest = rest[rest.index(after: at)...] }
        var host: Substring
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else {
                throw URLTargetError(url: url, problem: "unterminated [IPv6] host")
            }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                portText = after.dropFirst()
            } else if !after.isEmpty {
                throw URLTargetError(url: url, problem: "unexpected text after the [IPv6] host")
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest
        }
        guard !host.isEmpty else { throw URLTargetError(url: url, problem: "no host") }
        var port: Int?
        if let p = portText {
            guard let n = Int(p), (1...65535).contains(n) else {
                throw URLTargetError(url: url, problem: "port \(p) is not a number from 1 to 65535")
            }
            port = n
        }
        self.init(scheme: scheme, host: String(host), port: port)
    }
}
