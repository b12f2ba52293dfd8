/// `--auth user:pass`: the Basic credentials a client must send in `Proxy-Authorization`, and that the web view
/// asks for in `Authorization`. Here, below both the session (`ProxyCore`) and the web view, which check them.
public struct ProxyCredentials: Sendable, Hashable {
    public var user: String
    public var password: String

    /// Parses `USER:PASSWORD`, both non-empty (the user name ends at the first colon). The error never repeats
    /// the value, which holds the password.
    public init(parsing text: String) throws(ProxyCredentialsError) {
        guard let colon = text.firstIndex(of: ":") else { throw ProxyCredentialsError("--auth expects USER:PASSWORD") }
        user = String(text[..<colon])
        password = String(text[text.index(after: colon)...])
        guard !user.isEmpty else { throw ProxyCredentialsError("--auth expects USER:PASSWORD; the user name is empty") }
        guard !password.isEmpty else {
            throw ProxyCredentialsError("--auth expects USER:PASSWORD; the password is empty")
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

/// Why a `--auth` value is not `USER:PASSWORD`; the message never repeats the value, which holds the password.
public struct ProxyCredentialsError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
