#if canImport(Glibc)
import Glibc
#endif
import CaptureStore
import HTTP1Core
import ProxyEventLoop
import ProxyTrace
import TLSCore

/// A request to send through the proxy (issue 34): a captured exchange's, as captured or edited (a replay, which
/// names its original), or one written from scratch (compose).
public struct ReplayRequest: Sendable, Equatable {
    public var method: String
    /// Absolute: `https://host[:port]/path?query` or `http://…`.
    public var url: String
    /// In order, as they go (the hop-by-hop and proxy fields, `Host` and `Content-Length` are the client's own: see
    /// `ReplayClient.fieldsSent`).
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// The captured exchange this one resends; nil for a composed request.
    public var replayOf: Int64?

    public init(method: String, url: String, headers: [(String, String)], body: [UInt8], replayOf: Int64?) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.replayOf = replayOf
    }

    public static func == (a: ReplayRequest, b: ReplayRequest) -> Bool {
        a.method == b.method && a.url == b.url && a.headers.map { [$0.0, $0.1] } == b.headers.map { [$0.0, $0.1] }
            && a.body == b.body && a.replayOf == b.replayOf
    }

    /// The request of a captured exchange, as the client sent it (the proxy's rules apply again on the way).
    /// nil when the capture kept no request head (a tunnel, a refused handshake) or cut the body short.
    public static func captured(_ exchange: CapturedExchange, body: [UInt8]?) -> Result<ReplayRequest, ReplayError> {
        guard let head = exchange.record.detail?.request else {
            return .failure(ReplayError("exchange \(exchange.id) kept no request head (a tunnel or a refused handshake?)"))
        }
        if let kept = exchange.record.detail?.requestBody, kept.isTruncated, body == nil {
            return .failure(ReplayError(
                "exchange \(exchange.id)'s request body was cut at the capture's limit: give the body to send"))
        }
        let sent = body ?? exchange.record.detail?.requestBody?.bytes ?? []
        return .success(ReplayRequest(
            method: head.method, url: exchange.record.url, headers: head.headers.map { ($0.name, $0.value) },
            body: sent, replayOf: exchange.id))
    }
}

/// What came back.
public struct ReplayAnswer: Sendable, Equatable {
    public var status: Int
    public var reason: String
    public var headers: [[String]]
    /// The first `ReplayClient.bodyLimit` bytes of the body.
    public var body: [UInt8]
    /// Every byte of the body, kept or not.
    public var bodySize: Int
}

/// Why a request could not be sent, or got no answer.
public struct ReplayError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The proxy as its own client (issue 34): replay and compose send their request to the proxy's explicit-proxy
/// listener on loopback, as a device would, so it meets the same path as the app's traffic: the rules, the ATS
/// verdict on the upstream connection, the capture. `https` goes through `CONNECT` and a TLS session that trusts the
/// proxy's CA only (the leaf it mints for the host); `http` as an absolute-form request. A replay carries the
/// marker field (`ExchangeSummary.replayMarkerField`), which the proxy takes off and records as `replayOf`.
///
/// Blocking, with one deadline over the whole exchange (`timeout`): for worker threads and the CLI, never a loop.
/// One request per connection; the answer is read until its framing ends (or the proxy closes).
public struct ReplayClient: Sendable {
    /// Where the proxy listens (a loopback address, normally).
    public var proxyHost: String
    public var proxyPort: Int
    /// The proxy's CA certificate, PEM: the only root the TLS session trusts.
    public var caPEM: String?
    /// `Proxy-Authorization` for a proxy with credentials (`Basic …`).
    public var proxyAuthorization: String?
    /// Seconds for the whole exchange: connect, handshake, request and answer.
    public var timeout: Double

    /// Response body bytes kept in the answer (the capture keeps the whole exchange as the proxy saw it).
    public static let bodyLimit = 1 << 20

    public init(proxyHost: String, proxyPort: Int, caPEM: String?, proxyAuthorization: String? = nil, timeout: Double = 30) {
        self.proxyHost = proxyHost
        self.proxyPort = proxyPort
        self.caPEM = caPEM
        self.proxyAuthorization = proxyAuthorization
        self.timeout = timeout
    }

    /// The fields the client writes itself and never takes from a captured or edited request: hop by hop
    /// (RFC 9110 §7.6.1), the proxy's, and the framing (the body sent decides it).
    static let fieldsSent: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "keep-alive", "proxy-connection", "te",
        "upgrade", "proxy-authorization", "proxy-authenticate", "trailer", ExchangeSummary.replayMarkerField.lowercased(),
    ]

    /// The parts of an absolute URL the client needs.
    struct Target: Equatable {
        var secure: Bool
        var host: String
        var port: Int
        /// `host[:port]`, the port left out when it is the scheme's own (the `Host` field).
        var authority: String
        /// `/path?query`.
        var path: String

        init?(_ url: String) {
            let lower = url.lowercased()
            if lower.hasPrefix("https://") {
                secure = true
            } else if lower.hasPrefix("http://") {
                secure = false
            } else {
                return nil
            }
            let rest = url.dropFirst(secure ? 8 : 7)
            let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
            let hostPort = String(rest[..<authorityEnd])
            var p = String(rest[authorityEnd...])
            if let hash = p.firstIndex(of: "#") { p = String(p[..<hash]) }
            path = p.isEmpty ? "/" : p.hasPrefix("?") ? "/" + p : p
            var h = Substring(hostPort)
            var port = secure ? 443 : 80
            if h.hasPrefix("["), let close = h.firstIndex(of: "]") {
                let after = h[h.index(after: close)...]
                if after.hasPrefix(":") {
                    guard let given = Int(after.dropFirst()) else { return nil }
                    port = given
                }
                h = h[...close]
            } else if let colon = h.lastIndex(of: ":") {
                guard let given = Int(h[h.index(after: colon)...]) else { return nil }
                port = given
                h = h[..<colon]
            }
            guard !h.isEmpty, (1...65535).contains(port) else { return nil }
            host = String(h)
            self.port = port
            authority = port == (secure ? 443 : 80) ? host : "\(host):\(port)"
        }

        /// The host without IPv6 brackets (SNI, CONNECT's address part keeps them).
        var bareHost: String { host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host }
    }

    /// The request's head as the proxy receives it: the request line (absolute-form for http, origin-form inside a
    /// tunnel), `Host` first, the request's own fields in order, the marker, and the framing.
    static func head(_ request: ReplayRequest, target: Target, absolute: Bool, authorization: String?) -> [UInt8] {
        var text = "\(request.method) \(absolute ? (target.secure ? "https://" : "http://") + target.authority + target.path : target.path) HTTP/1.1\r\n"
        text += "Host: \(target.authority)\r\n"
        // The framing goes where the request had it (a replay's head then reads as the original's, field by field).
        let framed = !request.body.isEmpty || ["POST", "PUT", "PATCH"].contains(request.method.uppercased())
        var lengthWritten = false
        for (name, value) in request.headers {
            let lower = name.lowercased()
            if lower == "content-length" || lower == "transfer-encoding" {
                if framed && !lengthWritten { text += "Content-Length: \(request.body.count)\r\n" }
                lengthWritten = true
                continue
            }
            if fieldsSent.contains(lower) { continue }
            text += "\(name): \(value)\r\n"
        }
        if absolute, let authorization { text += "Proxy-Authorization: \(authorization)\r\n" }
        if let original = request.replayOf { text += "\(ExchangeSummary.replayMarkerField): \(original)\r\n" }
        if framed && !lengthWritten { text += "Content-Length: \(request.body.count)\r\n" }
        text += "\r\n"
        return Array(text.utf8)
    }

    /// Sends `request` through the proxy and reads the answer.
    public func send(_ request: ReplayRequest) throws(ReplayError) -> ReplayAnswer {
        guard let target = Target(request.url) else {
            throw ReplayError("not an absolute http:// or https:// URL: \(request.url)")
        }
        guard Self.isToken(request.method) else { throw ReplayError("not a method: '\(request.method)'") }
        for (name, value) in request.headers {
            guard Self.isToken(name), !value.contains("\r"), !value.contains("\n"), !value.contains("\0") else {
                throw ReplayError("not a header field: '\(name): \(value)'")
            }
        }
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int(timeout * 1000))
        func left() throws(ReplayError) -> Double {
            let (s, atto) = (deadline - clock.now).components
            let seconds = Double(s) + Double(atto) / 1e18
            guard seconds > 0 else { throw ReplayError("no answer within \(Int(timeout)) s") }
            return seconds
        }
        let socket: BlockingTCPClient
        do {
            socket = try BlockingTCPClient(host: proxyHost, port: proxyPort, timeout: timeout)
        } catch {
            throw ReplayError("cannot reach the proxy at \(proxyHost):\(proxyPort): \(error)")
        }
        defer { socket.close() }
        func sendRaw(_ bytes: [UInt8]) throws(ReplayError) {
            let seconds = try left()
            do throws(IOError) { try socket.send(bytes, timeout: seconds) } catch {
                throw ReplayError("the proxy closed the connection while the request was sent (\(error))")
            }
        }
        func receiveRaw() throws(ReplayError) -> [UInt8]? {
            let seconds = try left()
            do throws(IOError) { return try socket.receive(timeout: seconds) } catch {
                if error.errnoCode == ETIMEDOUT { throw ReplayError("no answer within \(Int(timeout)) s") }
                return nil
            }
        }
        if !target.secure {
            try sendRaw(Self.head(request, target: target, absolute: true, authorization: proxyAuthorization) + request.body)
            var parser = HTTP1Parser(role: .responses)
            parser.expectResponse(toRequestMethod: request.method)
            return try Self.readAnswer(&parser, receive: receiveRaw)
        }
        // CONNECT, then TLS to the proxy's minted leaf.
        var connect = "CONNECT \(target.host):\(target.port) HTTP/1.1\r\nHost: \(target.host):\(target.port)\r\n"
        if let proxyAuthorization { connect += "Proxy-Authorization: \(proxyAuthorization)\r\n" }
        try sendRaw(Array((connect + "\r\n").utf8))
        var tunnel = HTTP1Parser(role: .responses)
        tunnel.expectResponse(toRequestMethod: "CONNECT")
        var leftover: [UInt8] = []
        connectLoop: for _ in 0..<10_000 {
            let event: HTTP1Event
            do { event = try tunnel.nextEvent() } catch { throw ReplayError("the proxy's answer to CONNECT: \(error)") }
            switch event {
            case .responseHead(let head):
                guard (200..<300).contains(head.status) else {
                    throw ReplayError("the proxy refused the tunnel to \(target.authority): \(head.status) \(head.reason)")
                }
            case .needMoreData:
                guard let bytes = try receiveRaw() else { throw ReplayError("the proxy closed the tunnel") }
                tunnel.receive(bytes)
            case .switchedProtocols(let rest):
                leftover = rest
                break connectLoop
            case .end, .paused, .body:
                // A 2xx to CONNECT has no body: the parser switches at its head.
                continue
            case .connectionClosed, .requestHead:
                throw ReplayError("the proxy closed the tunnel")
            }
        }
        let engine: TLSEngine
        do {
            var roots: [Certificate] = []
            if let caPEM { roots = try Certificate.chain(pem: caPEM) }
            let configuration = TLSConfiguration(
                role: .client, verifyPeer: !roots.isEmpty, additionalTrustRoots: roots, alpnProtocols: ["http/1.1"])
            // An IP literal is no server name (RFC 6066 §3): no SNI, as a client sends none.
            let sni = target.bareHost.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) ? nil : target.bareHost
            engine = try TLSEngine(context: TLSContext(configuration), serverName: sni)
        } catch {
            throw ReplayError("cannot set up TLS: \(error)")
        }
        if !leftover.isEmpty { engine.feed(leftover) }
        let step: TLSEngine.HandshakeStep
        do {
            step = try engine.runHandshake(send: { try sendRaw($0) }, receive: { try receiveRaw() })
        } catch let error as ReplayError {
            throw error
        } catch {
            throw ReplayError("TLS with the proxy: \(error)")
        }
        switch step {
        case .complete: break
        case .failed(let error):
            throw ReplayError(
                "the proxy failed the TLS handshake for \(target.host) (as the app would see it: the load is refused): \(error)")
        case .needsMoreInput: throw ReplayError("the proxy closed the connection during the TLS handshake")
        }
        do {
            try engine.write(Self.head(request, target: target, absolute: false, authorization: nil) + request.body)
        } catch {
            throw ReplayError("TLS with the proxy: \(error)")
        }
        try sendRaw(engine.takeOutput())
        var parser = HTTP1Parser(role: .responses)
        parser.expectResponse(toRequestMethod: request.method)
        var ended = false
        return try Self.readAnswer(&parser) { () throws(ReplayError) -> [UInt8]? in
            // Bounded by the deadline: every pass reads the socket or ends.
            while !ended {
                switch engine.read() {
                case .data(let bytes): return bytes
                case .closed:
                    ended = true
                    return nil
                case .failed(let error): throw ReplayError("TLS with the proxy: \(error)")
                case .needsMoreInput:
                    if engine.hasOutput { try sendRaw(engine.takeOutput()) }
                    if let bytes = try receiveRaw() { engine.feed(bytes) } else { engine.feedEndOfInput() }
                }
            }
            return nil
        }
    }

    /// A token (RFC 9110 §5.6.2): a method or a field name.
    static func isToken(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || Array("!#$%&'*+-.^_`|~".utf8).contains(b)
        }
    }

    /// Reads one response (skipping interim 1xx heads) until its framing ends or the connection does.
    static func readAnswer(
        _ parser: inout HTTP1Parser, receive: () throws(ReplayError) -> [UInt8]?
    ) throws(ReplayError) -> ReplayAnswer {
        var answer: ReplayAnswer?
        var sawEOF = false
        // Bounded: each pass consumes input, or reads the socket within the deadline.
        for _ in 0..<1_000_000 {
            let event: HTTP1Event
            do { event = try parser.nextEvent() } catch {
                if let answer, sawEOF { return answer }
                throw ReplayError("the proxy's answer is not HTTP/1.1: \(error)")
            }
            switch event {
            case .responseHead(let head):
                // An interim 1xx: the final head follows.
                if head.status < 200 && head.status != 101 { continue }
                answer = ReplayAnswer(
                    status: head.status, reason: head.reason, headers: head.headers.map { [$0.name, $0.value] },
                    body: [], bodySize: 0)
            case .body(let bytes):
                answer?.bodySize += bytes.count
                if let kept = answer?.body.count, kept < bodyLimit { answer?.body += bytes.prefix(bodyLimit - kept) }
            case .end, .paused, .switchedProtocols:
                if let answer { return answer }
            case .needMoreData:
                guard !sawEOF else {
                    if let answer { return answer }
                    throw ReplayError("the proxy closed the connection before answering")
                }
                if let bytes = try receive() { parser.receive(bytes) } else {
                    sawEOF = true
                    parser.receiveEOF()
                }
            case .connectionClosed, .requestHead:
                if let answer { return answer }
                throw ReplayError("the proxy closed the connection before answering")
            }
        }
        throw ReplayError("the answer did not end")
    }
}
