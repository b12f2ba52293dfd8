/// What an `NSExceptionDomains` / `NSPinnedDomains` key is, syntactically (reference §2.2, §2.3).
enum HostKey: Equatable {
    case name
    case ipAddress
    case cidr
    /// Looks like an address range but cannot be parsed (ATS logs a fault and never uses it; src S1).
    case invalidCIDR(reason: String)
    case hasScheme
    case hasPath
    case hasPort
    case wildcard
    case invalid(reason: String)

    static func classify(_ key: String) -> HostKey {
        if key.isEmpty { return .invalid(reason: "it is empty") }
        if key.unicodeScalars.contains(where: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }) {
            return .invalid(reason: "it contains whitespace")
        }
        let lowered = key.lowercased()
        if lowered.contains("://") || lowered.hasPrefix("http:") || lowered.hasPrefix("https:") { return .hasScheme }
        if key.contains("*") { return .wildcard }
        if let slash = key.firstIndex(of: "/") {
            let address = String(key[..<slash])
            let prefix = String(key[key.index(after: slash)...])
            if address.contains("%") { return .invalidCIDR(reason: "interface-scoped addresses are not supported") }
            if isIPv6(address) {
                guard let bits = Int(prefix), (0...128).contains(bits) else {
                    return .invalidCIDR(reason: "an IPv6 prefix length must be 0…128")
                }
                return .cidr
            }
            if isAbbreviatedIPv4(address) {
                guard let bits = Int(prefix), (0...32).contains(bits) else {
                    return .invalidCIDR(reason: "an IPv4 prefix length must be 0…32")
                }
                return .cidr
            }
            if address.allSatisfy({ $0.isNumber || $0 == "." || $0 == ":" }) && !address.isEmpty {
                return .invalidCIDR(reason: "\(address) is not an IP address")
            }
            return .hasPath
        }
        if key.contains("%") && key.contains(":") {
            return .invalidCIDR(reason: "interface-scoped addresses are not supported")
        }
        if isIPv4(key) || isIPv6(key) { return .ipAddress }
        if key.hasPrefix("[") { return .hasPort }
        if let colon = key.lastIndex(of: ":") {
            let port = key[key.index(after: colon)...]
            if !port.isEmpty && port.allSatisfy(\.isASCII) && port.allSatisfy(\.isNumber) { return .hasPort }
            return .invalid(reason: "':' cannot appear in a host name")
        }
        let allowed = key.unicodeScalars.allSatisfy { s in
            ("a"..."z").contains(s) || ("A"..."Z").contains(s) || ("0"..."9").contains(s) || s == "." || s == "-"
                || s == "_"
        }
        if !allowed {
            return .invalid(
                reason: "it has characters a host name in a URL never has (write internationalised names in their "
                    + "xn-- punycode form)")
        }
        if key.hasPrefix(".") || key.contains("..") { return .invalid(reason: "it has an empty label") }
        return .name
    }

    /// Four dotted decimals 0…255.
    static func isIPv4(_ s: String) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy(isOctet)
    }

    /// One to four dotted decimals (src S1 pads `10/8` to `10.0.0.0/8`).
    static func isAbbreviatedIPv4(_ s: String) -> Bool {
        let parts = s.split(separator: ".", omittingEmptySubsequences: false)
        return (1...4).contains(parts.count) && parts.allSatisfy(isOctet)
    }

    static func isOctet(_ p: Substring) -> Bool {
        guard (1...3).contains(p.count), p.allSatisfy({ $0.isASCII && $0.isNumber }), let v = Int(p) else {
            return false
        }
        return v <= 255
    }

    /// RFC 4291 text form: up to eight 1–4 digit hex groups, at most one `::`, optionally ending in IPv4.
    static func isIPv6(_ s: String) -> Bool {
        guard s.contains(":") else { return false }
        let halves = s.split(separator: "::", omittingEmptySubsequences: false)
        guard halves.count <= 2 else { return false }
        var groups = 0
        for (h, half) in halves.enumerated() where !half.isEmpty {
            let parts = half.split(separator: ":", omittingEmptySubsequences: false)
            for (i, part) in parts.enumerated() {
                let isLastOverall = h == halves.count - 1 && i == parts.count - 1
                if isLastOverall && part.contains(".") {
                    guard isIPv4(String(part)) else { return false }
                    groups += 2
                    continue
                }
                guard (1...4).contains(part.count), part.allSatisfy(\.isHexDigit) else { return false }
                groups += 1
            }
        }
        return halves.count == 2 ? groups <= 7 : groups == 8
    }
}
