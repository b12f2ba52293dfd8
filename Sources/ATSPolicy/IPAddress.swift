/// An IPv4 or IPv6 address literal, as a URL host or an `NSExceptionDomains` key names it.
public enum IPAddress: Sendable, Hashable, Codable, CustomStringConvertible {
    case v4([UInt8])  // 4 bytes, network order
    case v6([UInt8])  // 16 bytes, network order

    /// Parses a dotted-quad IPv4 or an RFC 4291 IPv6 literal (with `::` and an optional IPv4 tail). Like
    /// `inet_pton`: no leading zeros in IPv4 octets, no brackets. An IPv6 zone (`fe80::1%en0`) is dropped, since a
    /// connection host may carry one.
    public init?(_ text: String) {
        guard IPAddress.mayBeLiteral(text) else { return nil }
        if let b = IPAddress.parseV4(Substring(text)) {
            self = .v4(b)
            return
        }
        var s = Substring(text)
        if let pct = s.firstIndex(of: "%") { s = s[..<pct] }
        guard let b = IPAddress.parseV6(s) else { return nil }
        self = .v6(b)
    }

    /// The address in network byte order (4 or 16 bytes).
    public var bytes: [UInt8] {
        switch self {
        case .v4(let b), .v6(let b): b
        }
    }

    /// True for IPv4.
    public var isV4: Bool { if case .v4 = self { true } else { false } }

    /// Dotted quad, or eight uncompressed hex groups for IPv6.
    public var description: String {
        switch self {
        case .v4(let b): b.map(String.init).joined(separator: ".")
        case .v6(let b):
            stride(from: 0, to: 16, by: 2).map { String(UInt16(b[$0]) << 8 | UInt16(b[$0 + 1]), radix: 16) }
                .joined(separator: ":")
        }
    }

    /// 127.0.0.0/8 or ::1.
    public var isLoopback: Bool {
        switch self {
        case .v4(let b): b[0] == 127
        case .v6(let b): b[0..<15].allSatisfy { $0 == 0 } && b[15] == 1
        }
    }

    /// 169.254.0.0/16 or fe80::/10.
    public var isLinkLocal: Bool {
        switch self {
        case .v4(let b): b[0] == 169 && b[1] == 254
        case .v6(let b): b[0] == 0xFE && (b[1] & 0xC0) == 0x80
        }
    }

    /// RFC 1918 (10/8, 172.16/12, 192.168/16) or IPv6 unique-local (fc00::/7).
    public var isPrivate: Bool {
        switch self {
        case .v4(let b): b[0] == 10 || (b[0] == 172 && (b[1] & 0xF0) == 16) || (b[0] == 192 && b[1] == 168)
        case .v6(let b): (b[0] & 0xFE) == 0xFC
        }
    }

    /// False when `text` can be neither literal: it has no colon (every IPv6 literal has one) and a byte other than
    /// an ASCII digit or a dot (an IPv4 literal has no other). Host names are what callers pass most: a new
    /// intercepted connection asks five times whether its host is a literal (host tables, the policy's exception
    /// match, the upstream leg), and the parsers reject a name only after splitting it into substrings.
    static func mayBeLiteral(_ text: String) -> Bool {
        var digitsAndDotsOnly = true
        for byte in text.utf8 {
            if byte == UInt8(ascii: ":") { return true }
            if byte != UInt8(ascii: "."), byte < UInt8(ascii: "0") || byte > UInt8(ascii: "9") { digitsAndDotsOnly = false }
        }
        return digitsAndDotsOnly
    }

    static func parseV4(_ s: Substring) -> [UInt8]? {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var out: [UInt8] = []
        for p in parts {
            guard !p.isEmpty, p.count <= 3, p.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            if p.count > 1 && p.first == "0" { return nil }
            guard let v = Int(p), v <= 255 else { return nil }
            out.append(UInt8(v))
        }
        return out
    }

    static func parseV6(_ s: Substring) -> [UInt8]? {
        guard !s.isEmpty, s.count <= 45 else { return nil }
        let halves = s.components(separatedByDoubleColon: ())
        guard halves.count <= 2 else { return nil }
        func groups(_ part: Substring, allowV4Tail: Bool) -> [UInt8]? {
            if part.isEmpty { return [] }
            let items = part.split(separator: ":", omittingEmptySubsequences: false)
            var out: [UInt8] = []
            for (i, item) in items.enumerated() {
                if allowV4Tail && i == items.count - 1 && item.contains(".") {
                    guard let v4 = parseV4(item) else { return nil }
                    out += v4
                    continue
                }
                guard !item.isEmpty, item.count <= 4, let v = UInt16(item, radix: 16) else { return nil }
                out += [UInt8(v >> 8), UInt8(v & 0xFF)]
            }
            return out
        }
        if halves.count == 1 {
            guard let all = groups(halves[0], allowV4Tail: true), all.count == 16 else { return nil }
            return all
        }
        guard let head = groups(halves[0], allowV4Tail: false), let tail = groups(halves[1], allowV4Tail: true),
            head.count + tail.count <= 14
        else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }
}

extension Substring {
    /// Splits at the first `::` only (a second one makes the address invalid, caught by the caller).
    fileprivate func components(separatedByDoubleColon _: Void) -> [Substring] {
        var result: [Substring] = []
        var rest = self[...]
        while let r = rest.firstRange(of: "::") {
            result.append(rest[..<r.lowerBound])
            rest = rest[r.upperBound...]
        }
        result.append(rest)
        return result
    }
}

/// A CIDR range key of `NSExceptionDomains` (iOS 17+), parsed the way Apple's
/// `cidr_string_to_subnet_and_mask` does (reference §2.3, src S1): IPv4 unless the text has hex digits or
/// colons; an IPv4 prefix may be abbreviated (`10/8` is padded to `10.0.0.0/8`); an IPv6 network without `::`
/// and fewer than 7 colons gets `::` appended; no interface scope.
public struct CIDRRange: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The network address (host bits as written).
    public let network: IPAddress
    /// Prefix length in bits.
    public let prefixLength: Int

    /// nil when the key is not valid CIDR notation (Apple logs a fault and the entry never matches).
    public init?(key: String) {
        let parts = key.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty, parts[1].count <= 3,
            parts[1].allSatisfy({ $0.isASCII && $0.isNumber }), let bits = Int(parts[1])
        else { return nil }
        let addr = parts[0]
        let isV6 = addr.contains(":") || addr.contains(where: { $0.isHexDigit && !$0.isNumber })
        if !isV6 {
            guard bits <= 32, !addr.hasSuffix(".") else { return nil }
            var text = String(addr)
            var dots = addr.filter { $0 == "." }.count
            while dots < 3 {
                text += ".0"
                dots += 1
            }
            guard let b = IPAddress.parseV4(Substring(text)) else { return nil }
            network = .v4(b)
        } else {
            guard bits <= 128 else { return nil }
            var text = String(addr)
            let colons = addr.filter { $0 == ":" }.count
            if !addr.contains("::") && colons < 7 { text += "::" }
            guard let b = IPAddress.parseV6(Substring(text)) else { return nil }
            network = .v6(b)
        }
        prefixLength = bits
    }

    /// True when `address` is of the same family and inside the range.
    public func contains(_ address: IPAddress) -> Bool {
        guard address.isV4 == network.isV4 else { return false }
        let a = address.bytes, n = network.bytes
        var remaining = prefixLength
        for i in 0..<a.count where remaining > 0 {
            let maskBits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - maskBits))
            if a[i] & mask != n[i] & mask { return false }
            remaining -= maskBits
        }
        return true
    }

    public var description: String { "\(network)/\(prefixLength)" }
}
