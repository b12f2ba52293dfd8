import HTTP1Core
import TLSCore

// Theory of operation: transparent mode (`--mode transparent`). The devices' gateway redirects their TCP connections
// to the proxy's port (an nftables `redirect`); the adapter reads where each was going (SO_ORIGINAL_DST) and starts
// the session with it (`startTransparent`), as if the client had sent `CONNECT address:port` and been answered 200:
//
// - the client's first bytes are sniffed (SessionContext+Sniffing);
// - a TLS ClientHello: its SNI names the host (no SNI: the destination address stands in, as a CONNECT's host does).
//   A host that must not be intercepted (Apple's own, --passthrough, pinned, auto-passthrough) becomes a raw tunnel
//   by that name (FrontLayer's `tunnelWithoutInterception`); any other is intercepted (InterceptLayer), exactly as
//   after a CONNECT;
// - an HTTP request line: plain-HTTP forwarding (PlainLayer), each origin-form request made absolute from its Host
//   (none: the destination address), so that it is judged, answered and logged as a proxy's absolute-form request;
// - anything else: a raw tunnel to the destination; nothing from the client within --client-timeout (a protocol
//   whose server speaks first) too.
//
// Every upstream connection goes to the original destination address unless --map names the host
// (`upstreamAddress`); the adapter's target admission still refuses the proxy itself. A transparent client owes no
// proxy credentials: it never saw a proxy, and only the gateway's own redirect can bring a connection here (one
// straight to the proxy's port is refused by the adapter).

extension SessionContext {
    /// Starts a connection the gateway's firewall redirected to the proxy; `address:port` is where the client was
    /// connecting (numeric). `resolvedName`: the name the device looked up to get that address (WireGuard mode's
    /// DNS), which stands in for a missing SNI instead of the address. Call once, before the client's first bytes.
    func startTransparent(destinationAddress address: String, port: Int, resolvedName: String? = nil) {
        transparentDestination = (address, port)
        phase = .sniffing(host: resolvedName ?? address, port: port, buffer: [])
        startClientHelloDeadline()
    }

    /// Where to connect for `host:port`: the --map target for the host, else a transparent connection's original
    /// destination, else the host itself.
    func upstreamAddress(host: String, port: Int) -> (address: String, port: Int) {
        if let destination = transparentDestination, env.mappings.lookup(host) == nil { return destination }
        return env.upstreamAddress(host: host, port: port)
    }

    /// A transparent connection's ClientHello to a host that must not be intercepted, named by its SNI: tunnelled
    /// (with the hello's bytes), and true. False for a host to intercept.
    func tunnelTransparentHello(_ hello: ClientHello, bytes: [UInt8], destination: String, port: Int) -> Bool {
        let sni = hello.serverName.map { $0.lowercased() }
        let host = sni.flatMap { Self.isPlausibleDNSName($0) ? $0 : nil } ?? destination
        return tunnelWithoutInterception(host: host, port: port, pending: bytes, established: nil)
    }

    /// A transparent connection's first bytes that are not TLS: plain-HTTP forwarding when they start a request
    /// line, a wait when too few have come to tell (true for both); false for anything else.
    func sniffTransparentCleartext(host: String, port: Int, buffer: [UInt8]) -> Bool {
        switch Self.startsHTTPRequest(buffer) {
        case nil:
            phase = .sniffing(host: host, port: port, buffer: buffer)
            return true
        case true?:
            startPlain(replaying: buffer)
            return true
        case false?:
            return false
        }
    }

    /// The client said nothing within --client-timeout: the server may be the one to speak first (SMTP, SSH), so
    /// the connection is relayed raw to its destination.
    func tunnelSilentTransparentClient(host: String, port: Int) {
        notice("\(host):\(port): the client sent nothing within \(env.timeouts.client); relaying the connection "
            + "as a plain tunnel (the server may speak first)", kind: "transparent client silent")
        let record = Tunnel(
            host: host, port: port, note: "tunnel: the client sent nothing first", started: now(),
            clientSpeaksTLS: false)
        startTunnel(record, pending: [], established: nil)
    }

    /// A transparent connection's origin-form request (`GET /path`, as sent to an origin) in absolute form
    /// (`GET http://host/path`), from its Host (none: the destination address; the destination's port when the Host
    /// names none and it is not 80), so that PlainLayer judges, answers and logs it as a proxy's request. Any other
    /// request is returned as it is.
    func absoluteForm(_ head: HTTPRequestHead) -> HTTPRequestHead {
        guard let destination = transparentDestination, head.target.hasPrefix("/") else { return head }
        var authority = head.headers[first: "Host"] ?? ""
        if authority.isEmpty {
            authority = destination.address.contains(":") ? "[\(destination.address)]" : destination.address
        }
        let hasPort = authority.lastIndex(of: ":").map { colon in
            authority.lastIndex(of: "]").map { $0 < colon } ?? true
        } ?? false
        if !hasPort, destination.port != 80 { authority += ":\(destination.port)" }
        var absolute = head
        absolute.target = "http://\(authority)\(head.target)"
        return absolute
    }

    /// The longest request method `startsHTTPRequest` waits for (`BASELINE-CONTROL` is 16).
    static let longestMethod = 20

    /// Whether `bytes` start an HTTP/1 request line (`METHOD SP`, a method of upper-case letters, `-` or `_`); nil
    /// while too few bytes have come to tell.
    static func startsHTTPRequest(_ bytes: [UInt8]) -> Bool? {
        for (index, byte) in bytes.prefix(longestMethod + 1).enumerated() {
            if byte == 0x20 { return index > 0 }
            guard (0x41...0x5A).contains(byte) || byte == 0x2D || byte == 0x5F else { return false }
        }
        return bytes.count > longestMethod ? false : nil
    }
}
