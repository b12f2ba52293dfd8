import HTTP1Core

/// One modify-headers rule's action (mitmproxy's `--modify-headers [/filter]/name/value`): set a header field,
/// or delete it when the value is empty.
///
/// As in mitmproxy, the matching modifications of one message apply together: first every field named by any of
/// them is removed, then each non-empty value is added in rule order. So two rules with the same name give two
/// fields, and a rule with an empty value deletes the field. Names are case-insensitive (the field keeps the
/// rule's spelling).
///
/// Fields that frame the message or belong to one hop (`Content-Length`, `Transfer-Encoding`, `Connection`,
/// `Keep-Alive`, `Upgrade`, `TE`, `Trailer`, `Proxy-Connection`) and HTTP/2 pseudo-headers are refused when the
/// rule loads: the relays own framing, and a rule that changed it would desynchronise the client from the body it
/// gets. A body rewrite keeps Content-Length right by itself (``BodyModification``).
public struct HeaderModification: Equatable, Sendable {
    /// Which messages a modification applies to. mitmproxy applies a rule without a filter to both; a filter such
    /// as `~q` or `~s` narrows it, which the rules stage turns into `.requests` or `.responses`.
    public enum Direction: Equatable, Sendable {
        case requests, responses, both

        func includes(_ other: Direction) -> Bool { self == .both || self == other }
    }

    public let name: String
    /// The value to set; empty deletes the field.
    public let value: String
    public let direction: Direction

    /// Names a rule may not touch (lower-cased).
    static let refused: Set<String> = [
        "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
        "proxy-connection",
    ]

    /// A modification; a name that is not a valid field name, a framing or hop-by-hop field, or a value with CR,
    /// LF or NUL is refused here, when the rules load.
    public init(name: String, value: String, direction: Direction = .both) throws(RuleActionError) {
        guard !name.isEmpty, name.utf8.allSatisfy(Self.isTokenByte) else {
            throw RuleActionError("modify headers: \"\(name)\" is not a valid header name")
        }
        guard !Self.refused.contains(name.lowercased()) else {
            throw RuleActionError(
                "modify headers: \(name) frames the message or belongs to one hop; the proxy sets it itself"
                    + " (a body rewrite keeps Content-Length right)")
        }
        guard !value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
            throw RuleActionError("modify headers: the value for \(name) contains a line break or NUL")
        }
        self.name = name
        self.value = value
        self.direction = direction
    }

    /// RFC 9110 §5.6.2 tchar.
    static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "Z"):
            true
        default:
            Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
    }

    /// `headers` with the modifications that apply to `direction`, in order (mitmproxy's remove-then-add).
    public static func apply(_ modifications: [HeaderModification], to headers: HTTPHeaders, direction: Direction)
        -> HTTPHeaders
    {
        let applying = modifications.filter { $0.direction.includes(direction) }
        guard !applying.isEmpty else { return headers }
        var result = headers
        for modification in applying { result.remove(name: modification.name) }
        for modification in applying where !modification.value.isEmpty {
            result.add(name: modification.name, value: modification.value)
        }
        return result
    }

    /// A request head with the modifications for requests, and both heads for the web view.
    public static func apply(_ modifications: [HeaderModification], to head: HTTPRequestHead)
        -> HeadChange<HTTPRequestHead>
    {
        var changed = head
        changed.headers = apply(modifications, to: head.headers, direction: .requests)
        return HeadChange(original: head, changed: changed)
    }

    /// A response head with the modifications for responses, and both heads for the web view.
    public static func apply(_ modifications: [HeaderModification], to head: HTTPResponseHead)
        -> HeadChange<HTTPResponseHead>
    {
        var changed = head
        changed.headers = apply(modifications, to: head.headers, direction: .responses)
        return HeadChange(original: head, changed: changed)
    }
}
