import HTTP1Core

/// What an HTTP/1.1 relay removes from a head before passing it on, so that the next hop reads the message the
/// proxy read and judged:
///
/// - the fields named in `Connection` (RFC 9110 §7.6.1: they were meant for the hop that received them), `Keep-Alive`
///   (its timeouts are that hop's) among them. The options `close`, `keep-alive` and `upgrade` stay in `Connection`:
///   they describe the relayed connection the same way on both hops, and `Upgrade` stays with `upgrade`. A head that
///   names `Content-Length`, `Transfer-Encoding` or `Host` is refused instead: the relay passes the body on in the
///   framing it came with, and a hop that honours the option would read another message than one that does not;
/// - in requests, an `h2c` upgrade and its `HTTP2-Settings` (RFC 9113 §3.1 and §3.2; Envoy strips them too): the
///   origin's `101` would turn the connection into HTTP/2 the proxy never parses, shows, records or judges. h2c was
///   never defined inside TLS at all. Other upgrades (WebSocket) stay.
///
/// Both return the head unchanged (the same value, so a relay can still send the bytes it received) when there is
/// nothing to remove, which is the common case and costs a scan of the head for `Connection` and `Upgrade`
/// (`HTTPHeaders.hasHopByHopFields`, which allocates nothing).
enum HopByHopFields {
    /// The connection options a relay passes on, each with the meaning it had.
    static let keptOptions: Set<String> = ["close", "keep-alive", "upgrade"]
    /// Options that name a field the relay cannot drop: the message's framing, or its host.
    static let framingFields: Set<String> = ["content-length", "transfer-encoding", "host"]

    /// Throws (400) when `Connection` names a framing field.
    static func request(_ head: HTTPRequestHead) throws(HTTP1Error) -> HTTPRequestHead {
        var head = head
        try strip(&head.headers, isRequest: true)
        return head
    }

    /// Throws (502) when `Connection` names a framing field.
    static func response(_ head: HTTPResponseHead) throws(HTTP1Error) -> HTTPResponseHead {
        var head = head
        try strip(&head.headers, isRequest: false)
        return head
    }

    private static func strip(_ headers: inout HTTPHeaders, isRequest: Bool) throws(HTTP1Error) {
        // The common case, found without allocating: nothing to remove.
        guard headers.hasHopByHopFields(h2cUpgrade: isRequest) else { return }
        let options = headers.listTokens(for: "Connection")
        if let named = options.first(where: framingFields.contains) {
            throw HTTP1Error(
                .remote, .invalidHeaderValue, status: isRequest ? 400 : 502,
                detail: "Connection names \(named), a field that frames the message or names its host")
        }
        var removed = Set(options.filter { $0 != "close" && $0 != "upgrade" })
        var kept = options.filter { keptOptions.contains($0) }
        var upgrades: [String]?
        if isRequest, headers.contains(name: "Upgrade") {
            let offered = headers.listTokens(for: "Upgrade")
            if offered.contains("h2c") {
                upgrades = offered.filter { $0 != "h2c" }
                removed.insert("http2-settings")
                if upgrades?.isEmpty == true { kept.removeAll { $0 == "upgrade" } }
            }
        }
        var fields = headers.fields.filter { field in
            let name = field.name.lowercased()
            return !removed.contains(name) && name != "connection" && (upgrades == nil || name != "upgrade")
        }
        if let upgrades, !upgrades.isEmpty {
            fields.append(HTTPHeaders.Field(name: "Upgrade", value: upgrades.joined(separator: ", ")))
        }
        if !kept.isEmpty {
            fields.append(HTTPHeaders.Field(name: "Connection", value: kept.joined(separator: ", ")))
        }
        headers = HTTPHeaders(fields.map { ($0.name, $0.value) })
    }
}
