import ATSPolicy
import ProxyTrace

/// What the proxy does when a connection violates the app's ATS policy (`--ats`).
public enum ATSMode: String, Sendable, CaseIterable {
    /// Block the connection so the client fails the way the app would.
    case enforce
    /// Never block; add `X-ATS-*` headers to the real responses.
    case annotate
    /// Do not evaluate ATS at all: a plain intercepting proxy.
    case off
    /// Never block; show the device an upstream exactly as weak as the real one (version, suite, leaf flaws) so the
    /// device's own ATS decides, and record what it did (docs/mirror.md).
    case mirror
}

/// How an enforced block reaches the client (`--block`).
public enum BlockStyle: String, Sendable, CaseIterable {
    /// Fail the client's own TLS handshake: a fatal alert for version/cipher violations, a leaf certificate with
    /// the same flaw for certificate violations.
    case tls
    /// Complete the handshake and answer every request with 502 (403 for -1022) and `X-ATS-*` headers.
    case http
}

/// Whether upstream TLS connections resume earlier sessions (`--upstream-resumption`).
public enum UpstreamResumption: String, Sendable, CaseIterable {
    /// Offer a session from the last ten minutes to the same origin, as URLSession and Network.framework do; a
    /// resumed handshake is judged on the certificate facts of the full handshake that established the session.
    case on
    /// Every upstream connection makes a full handshake.
    case off
}

/// `--map HOST=ADDR:PORT`: connect to another address for the hosts `pattern` covers (one host, or
/// `*.example.com` for every name below example.com), while SNI, Host and certificate checks still use the
/// request's own host name.
public struct HostMapping: Sendable, Hashable {
    public var pattern: HostPattern
    public var address: String
    public var port: Int

    /// Parses `host=addr:port` (`addr` an IP address, an IPv6 one in brackets, or a host name; `host` any
    /// `HostPattern`). The error names the option, the value and what is wrong with it.
    public init(parsing text: String) throws(ProxyOptionError) {
        guard let eq = text.firstIndex(of: "="), eq != text.startIndex else {
            throw ProxyOptionError("--map expects HOST=ADDR:PORT, got '\(text)'")
        }
        func bad(_ problem: String) -> ProxyOptionError { ProxyOptionError("--map '\(text)': \(problem)") }
        let pattern = try HostPattern(parsing: String(text[..<eq]), option: "--map", argument: text)
        let target = text[text.index(after: eq)...]
        let address: Substring
        let portText: Substring?
        if target.hasPrefix("[") {
            guard let close = target.firstIndex(of: "]") else { throw bad("the '[' of the IPv6 address is not closed") }
            address = target[target.index(after: target.startIndex)..<close]
            let rest = target[target.index(after: close)...]
            guard rest.isEmpty || rest.first == ":" else { throw bad("only ':PORT' may follow ']'") }
            portText = rest.isEmpty ? nil : rest.dropFirst()
            guard let ip = IPAddress(String(address)), !ip.isV4 else {
                throw bad("brackets hold an IPv6 address, and '\(address)' is none")
            }
        } else if target.filter({ $0 == ":" }).count > 1 {
            throw bad("an IPv6 address takes brackets before the port, as in [::1]:8443")
        } else if let colon = target.firstIndex(of: ":") {
            (address, portText) = (target[..<colon], target[target.index(after: colon)...])
        } else {
            (address, portText) = (target, nil)
        }
        guard let portText else { throw bad("the target needs a port (ADDR:PORT)") }
        guard !portText.isEmpty else { throw bad("the port is missing after ':' (ADDR:PORT)") }
        guard portText.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw bad("the port '\(portText)' is not a number")
        }
        guard let port = Int(portText), (1...65535).contains(port) else {
            throw bad("the port \(portText) is out of range (1–65535)")
        }
        guard !address.isEmpty else { throw bad("the target address is empty") }
        if address.contains("*") || address.hasPrefix(".") {
            throw bad("the target must be an IP address or a host name, not a pattern such as '\(address)'")
        }
        // Only the characters are checked: a name the resolver refuses (a label over 63 letters) is the origin's
        // -1003 to observe, not a usage error.
        if IPAddress(String(address)) == nil,
            let c = address.first(where: { !($0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0))) })
        {
            throw bad("the target must be an IP address or a host name: '\(c)' cannot appear in a host name")
        }
        self.pattern = pattern
        self.address = String(address)
        self.port = port
    }

    /// Parses every `--map` value, refusing two that name the same host pattern (in any case, with or without a
    /// trailing dot): the later would silently replace the earlier.
    public static func parsingAll(_ texts: [String]) throws(ProxyOptionError) -> [HostMapping] {
        var seen: [HostPattern: String] = [:]
        var mappings: [HostMapping] = []
        for text in texts {
            let mapping = try HostMapping(parsing: text)
            if let earlier = seen[mapping.pattern] {
                throw ProxyOptionError(
                    "--map '\(earlier)' and --map '\(text)' both map \(mapping.pattern); give each host one --map")
            }
            seen[mapping.pattern] = text
            mappings.append(mapping)
        }
        return mappings
    }
}

/// A bad proxy option, with a message that says what to write instead.
public struct ProxyOptionError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
