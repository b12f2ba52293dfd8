/// What a rule does to the exchanges it applies to. The actions themselves (reading files, rewriting bytes,
/// shaping traffic, minting flawed certificates) live elsewhere; these are their parameters, validated.
public enum RuleAction: Sendable, Equatable {
    /// Answer from a local file or directory when the URL matches `urlRegex` (mitmproxy's map local): the part of
    /// the URL below the match is a path inside a directory.
    case mapLocal(urlRegex: String, path: String)
    /// Set the header `name` (case-insensitive) to the value, or delete it when `value` is nil.
    case modifyHeaders(name: String, value: RuleText?)
    /// Replace each match of `regex` in a decoded text body.
    case modifyBody(regex: String, replacement: RuleText)
    /// Answer locally, without contacting the upstream.
    case answer(status: Int, headers: [RuleHeader], body: RuleText)
    /// Refuse the exchange: the app sees a connection failure.
    case block(BlockKind)
    /// Fail the client leg the way a flawed server or network would.
    case fault(FaultKind)
    /// Shape the connection's traffic.
    case throttle(ThrottleReference)
    /// Hold the exchange (its request head, its response, or both: the rule's points) until a person releases it
    /// (issue 34's breakpoints).
    case breakpoint

    /// The rules-file keyword and option name (without `--`) that writes this action.
    public var keyword: String {
        switch self {
        case .mapLocal: "map-local"
        case .modifyHeaders: "modify-headers"
        case .modifyBody: "modify-body"
        case .answer: "answer"
        case .block: "block"
        case .fault: "fault"
        case .throttle: "throttle"
        case .breakpoint: "breakpoint"
        }
    }
}

/// A value written in a rule, or (mitmproxy's `@path`) the contents of a file, read when the rule is applied.
public enum RuleText: Sendable, Equatable, CustomStringConvertible {
    case literal(String)
    case file(String)

    init(parsing text: String) {
        self = text.hasPrefix("@") ? .file(String(text.dropFirst())) : .literal(text)
    }

    /// As written: the text, or `@path`.
    public var description: String {
        switch self {
        case .literal(let text): text
        case .file(let path): "@" + path
        }
    }
}

/// A header an `answer` rule sends.
public struct RuleHeader: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// How a `block` rule refuses an exchange.
public enum BlockKind: String, Sendable, Equatable, CaseIterable {
    /// The connection is reset (the app sees -1005, network connection lost). The default.
    case reset
    /// The connection is refused before any byte (the proxy's CONNECT answer is 502; the app sees -1004).
    case refuse
}

/// A failure a `fault` rule injects on the client leg (issue 33's KINDs): certificate and TLS flaws the device's
/// own stack judges, network failures, and a status.
public enum FaultKind: Sendable, Equatable, CustomStringConvertible {
    case expired, notYetValid, wrongHost, selfSigned, untrustedRoot, sha1, rsa1024
    case tls10, tls11, noForwardSecrecy
    /// A valid leaf whose key the app cannot have pinned.
    case pinMismatch
    /// -1005.
    case reset
    /// -1001.
    case timeout
    /// -1009.
    case offline
    /// -1003.
    case dns
    /// Answer with this status instead of contacting the upstream.
    case status(Int)

    /// Every kind but `status`, by its spelling.
    public static let named: [FaultKind] = [
        .expired, .notYetValid, .wrongHost, .selfSigned, .untrustedRoot, .sha1, .rsa1024, .tls10, .tls11,
        .noForwardSecrecy, .pinMismatch, .reset, .timeout, .offline, .dns,
    ]

    /// The spelling in options and rules files: `not-yet-valid`, `tls1.0`, `status:503`.
    public var description: String {
        switch self {
        case .expired: "expired"
        case .notYetValid: "not-yet-valid"
        case .wrongHost: "wrong-host"
        case .selfSigned: "self-signed"
        case .untrustedRoot: "untrusted-root"
        case .sha1: "sha1"
        case .rsa1024: "rsa1024"
        case .tls10: "tls1.0"
        case .tls11: "tls1.1"
        case .noForwardSecrecy: "no-forward-secrecy"
        case .pinMismatch: "pin-mismatch"
        case .reset: "reset"
        case .timeout: "timeout"
        case .offline: "offline"
        case .dns: "dns"
        case .status(let status): "status:\(status)"
        }
    }

    /// The kind a spelling names (case-insensitive), or nil.
    public init?(spelling: String) {
        let s = spelling.lowercased()
        if s.hasPrefix("status:") {
            let digits = s.dropFirst("status:".count)
            guard digits.count == 3, digits.allSatisfy(\.isASCII), let status = Int(digits), (100...599).contains(status)
            else { return nil }
            self = .status(status)
            return
        }
        guard let kind = Self.named.first(where: { $0.description == s }) else { return nil }
        self = kind
    }

    /// Where the fault acts: a status answers the request; the rest act before the upstream is contacted.
    public var point: RulePoint {
        if case .status = self { return .requestHead }
        return .connection
    }
}

/// A throttle's profile, by reference: the throttle module defines the profiles and reads the custom figures.
public enum ThrottleReference: Sendable, Equatable, CustomStringConvertible {
    /// A Network Link Conditioner profile by name (`3G`, `Very Bad Network`), as written.
    case profile(String)
    /// `down=…,up=…,latency=…,loss=…`: each key at most once, at least one; the values as written.
    case custom([(key: String, value: String)])

    /// The keys a custom throttle takes.
    public static let customKeys = ["down", "up", "latency", "loss"]

    public var description: String {
        switch self {
        case .profile(let name): name
        case .custom(let pairs): pairs.map { "\($0.key)=\($0.value)" }.joined(separator: ",")
        }
    }

    public static func == (a: ThrottleReference, b: ThrottleReference) -> Bool {
        switch (a, b) {
        case (.profile(let x), .profile(let y)): x == y
        case (.custom(let x), .custom(let y)): x.elementsEqual(y, by: ==)
        default: false
        }
    }
}
