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

/// `--auth user:pass`: the Basic credentials a client must send in `Proxy-Authorization`.
public struct ProxyCredentials: Sendable, Hashable {
    public var user: String
    public var password: String

    /// Parses `USER:PASSWORD`, both non-empty (the user name ends at the first colon). The error never repeats
    /// the value, which holds the password.
    public init(parsing text: String) throws(ProxyOptionError) {
        guard let colon = text.firstIndex(of: ":") else { throw ProxyOptionError("--auth expects USER:PASSWORD") }
        user = String(text[..<colon])
        password = String(text[text.index(after: colon)...])
        guard !user.isEmpty else { throw ProxyOptionError("--auth expects USER:PASSWORD; the user name is empty") }
        guard !password.isEmpty else {
            throw ProxyOptionError("--auth expects USER:PASSWORD; the password is empty")
        }
    }

    /// Why a `Proxy-Authorization` field value is refused, or nil when it carries these credentials.
    public func refusal(ofProxyAuthorization value: String?) -> ProxyAuthFailure.Reason? {
        guard let value, !value.trimmingSpaces().isEmpty else { return .missing }
        return matches(value) ? nil : .wrong
    }

    private func matches(_ value: String) -> Bool {
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic" else { return false }
        guard let decoded = Base64.decode(String(parts[1]).trimmingSpaces()) else { return false }
        return Self.constantTimeEqual(decoded, Array("\(user):\(password)".utf8))
    }

    /// Compares `guess` with `secret` in a time that depends only on the secret's length: every byte of the
    /// secret is read whatever the guess, so a wrong guess learns neither a matching prefix nor the length.
    static func constantTimeEqual(_ guess: [UInt8], _ secret: [UInt8]) -> Bool {
        var diff = UInt(bitPattern: guess.count ^ secret.count)
        for index in secret.indices {
            // Past the guess's end, compare against the secret's own byte inverted: always a difference, same work.
            let byte = index < guess.count ? guess[index] : ~secret[index]
            diff |= UInt(byte ^ secret[index])
        }
        return diff == 0
    }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        var s = Substring(self)
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }
}

/// Minimal standard Base64 decoding (RFC 4648 §4, padding optional) for Basic credentials.
enum Base64 {
    static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for ch in text.utf8 {
            let v: UInt8
            switch ch {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = ch - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = ch - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = ch - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): v = 62
            case UInt8(ascii: "/"): v = 63
            case UInt8(ascii: "="): continue
            default: return nil
            }
            buffer = buffer << 6 | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        return out
    }
}
