import ATSPolicy

/// A host as `--passthrough` and `--map` name it: an exact host, `*.example.com` (every name below
/// example.com, at any depth, but not example.com itself) or `.example.com` (example.com and every name below it).
/// Case-insensitive; a trailing dot is ignored. IP literals match exactly only.
public struct HostPattern: Sendable, Hashable, CustomStringConvertible {
    /// Which hosts the pattern covers, relative to `name`.
    public enum Kind: Sendable, Hashable {
        /// Exactly this host name or IP literal.
        case exact
        /// `*.domain`: the names below `domain`, not `domain` itself.
        case subdomains
        /// `.domain`: `domain` and the names below it.
        case domainAndSubdomains
    }

    /// Which hosts the pattern covers.
    public let kind: Kind
    /// The host or domain, lowercased, without a trailing dot; an IP literal as `IPAddress` spells it.
    public let name: String

    /// Parses one pattern; `option` and `argument` (the whole command-line value, when the host is part of it) name
    /// it in the error.
    public init(parsing text: String, option: String, argument: String? = nil) throws(ProxyOptionError) {
        func bad(_ problem: String) -> ProxyOptionError {
            ProxyOptionError("\(option) '\(argument ?? text)': \(problem)")
        }
        var host = Substring(text.lowercased())
        if host.contains("://") { throw bad("a scheme is not part of a host; write the host alone, e.g. example.com") }
        if let slash = host.firstIndex(of: "/") {
            if IPAddress(String(host[..<slash])) != nil {
                throw bad(
                    "address ranges (CIDR) are not supported; name host names, *.domain wildcards or single IP "
                        + "addresses")
            }
            throw bad("a path is not part of a host; write the host alone, e.g. example.com")
        }
        if host.hasSuffix(".") { host = host.dropLast() }
        guard !host.isEmpty else { throw bad("the host is empty") }
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        if let address = IPAddress(String(host)) {
            (kind, name) = (.exact, address.description)
            return
        }
        if host.contains(":") { throw bad("a port is not part of a host; the pattern covers every port") }
        if host.hasPrefix("*.") {
            (kind, host) = (.subdomains, host.dropFirst(2))
        } else if host.hasPrefix(".") {
            (kind, host) = (.domainAndSubdomains, host.dropFirst())
        } else {
            kind = .exact
        }
        if host.contains("*") {
            throw bad("a wildcard must be the whole first label of a domain, as in *.example.com")
        }
        if let problem = Self.nameProblem(host) { throw bad(problem) }
        name = String(host)
    }

    /// Parses every value of `option`, refusing two that name the same pattern (in any case, with or without a
    /// trailing dot): one of them would be ignored.
    public static func parsingAll(_ texts: [String], option: String) throws(ProxyOptionError) -> [HostPattern] {
        var seen: [HostPattern: String] = [:]
        var patterns: [HostPattern] = []
        for text in texts {
            let pattern = try HostPattern(parsing: text, option: option)
            if let earlier = seen[pattern] {
                throw ProxyOptionError(
                    "\(option) '\(earlier)' and \(option) '\(text)' both name \(pattern); give each host once")
            }
            seen[pattern] = text
            patterns.append(pattern)
        }
        return patterns
    }

    /// `example.com`, `*.example.com` or `.example.com`.
    public var description: String {
        switch kind {
        case .exact: name
        case .subdomains: "*." + name
        case .domainAndSubdomains: "." + name
        }
    }

    /// What makes `name` no DNS name, or nil: labels of letters, digits, `-` and `_`, none empty or over 63
    /// characters, 253 in all.
    private static func nameProblem(_ name: Substring) -> String? {
        guard !name.isEmpty else { return "no domain follows the wildcard or leading dot" }
        guard name.utf8.count <= 253 else { return "a host name has at most 253 characters" }
        for label in name.split(separator: ".", omittingEmptySubsequences: false) {
            if label.isEmpty { return "the host has an empty label (two dots in a row, or a leading dot)" }
            if label.utf8.count > 63 { return "the label '\(label)' is longer than 63 characters" }
            if let c = label.first(where: { !($0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_")) }) {
                return "'\(c)' cannot appear in a host name"
            }
        }
        return nil
    }
}

/// Host patterns with a value each. A lookup finds the most specific pattern: the exact host, then `.host`, then
/// the wildcard of the nearest parent domain. Of two equal patterns, the later one counts.
public struct HostPatternTable<Value: Sendable>: Sendable {
    private var exact: [String: (HostPattern, Value)] = [:]
    private var apex: [String: (HostPattern, Value)] = [:]
    /// `*.d` and `.d`, keyed by `d`.
    private var below: [String: (HostPattern, Value)] = [:]

    /// A table of `entries`; a later entry replaces an earlier one with the same pattern.
    public init(_ entries: [(HostPattern, Value)]) {
        for (pattern, value) in entries {
            switch pattern.kind {
            case .exact: exact[pattern.name] = (pattern, value)
            case .subdomains: below[pattern.name] = (pattern, value)
            case .domainAndSubdomains:
                apex[pattern.name] = (pattern, value)
                below[pattern.name] = (pattern, value)
            }
        }
    }

    /// True when the table has no entries.
    public var isEmpty: Bool { exact.isEmpty && below.isEmpty }

    /// Every entry's value, in no particular order.
    public var values: [Value] { (exact.values.map(\.1) + apex.values.map(\.1) + below.values.map(\.1)) }

    /// The most specific pattern that covers `host` (in any case, with or without a trailing dot), and its value.
    public func lookup(_ host: String) -> (pattern: HostPattern, value: Value)? {
        guard !isEmpty else { return nil }
        var name = Substring(host.lowercased())
        if name.hasPrefix("["), name.hasSuffix("]") { name = name.dropFirst().dropLast() }
        if let address = IPAddress(String(name)) { return exact[address.description] }
        if name.hasSuffix(".") { name = name.dropLast() }
        let key = String(name)
        if let hit = exact[key] ?? apex[key] { return hit }
        while let dot = name.firstIndex(of: ".") {
            name = name[name.index(after: dot)...]
            if let hit = below[String(name)] { return hit }
        }
        return nil
    }
}
