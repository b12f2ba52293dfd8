import ATSPolicy
import FuzzSupport
import ProxyCore
import ProxyTrace
import TLSCore

// Input: [environment/connect outcome/transparent] [client chunking] [schedule] client bytes, optionally followed by
// "\r\n--upstream--\r\n" and the upstream's bytes. One ProxySession is driven the way the event loop drives it:
// client reads; the connect it asks for succeeds or fails; upstream reads while that connection is open; timers,
// EOFs and the close last. Once the session closes the client or hands both sides to a tunnel, it must ask for
// nothing more than logs and closing the upstream. With the setup's bit 8, the session starts as a transparent
// connection to 198.18.0.9:443 (bit 16: port 80) instead of reading a proxy request.

private let upstreamMarker = Array("\r\n--upstream--\r\n".utf8)

/// Built once: each holds a CA whose key generation would dominate a per-input setup.
private let environments: [ProxyEnvironment] = {
    do {
        let allowHTTP = PlistValue.dictionary(PlistDictionary([(key: "NSExceptionAllowsInsecureHTTPLoads", value: .bool(true))]))
        let ats = PlistDictionary([
            (key: "NSExceptionDomains", value: .dictionary(PlistDictionary([(key: "media.test", value: allowHTTP)])))
        ])
        let minter = LeafMinter(authority: try CertificateAuthority.create(commonName: "fuzz CA"), cacheCapacity: 16)
        let facts = HandshakeFactsCollector(trust: try TrustEvaluator(useSystemRoots: false))
        func environment(_ mode: ATSMode, _ block: BlockStyle, credentials: ProxyCredentials?) throws
            -> ProxyEnvironment
        {
            ProxyEnvironment(
                policy: ATSPolicy(atsDictionary: .dictionary(ats)), mode: mode, blockStyle: block,
                mappings: [try HostMapping(parsing: "*.x.test=127.0.0.1:9")],
                passthrough: [try HostPattern(parsing: "pass.test", option: "--passthrough")],
                credentials: credentials, minter: minter, factsCollector: facts, diagnosticsLevel: 3,
                jsonEvents: true, upstreamResumption: .off)
        }
        return [
            try environment(.enforce, .tls, credentials: nil),
            try environment(.annotate, .http, credentials: nil),
            try environment(.enforce, .http, credentials: try ProxyCredentials(parsing: "user:secret")),
            try environment(.off, .tls, credentials: nil),
        ]
    } catch {
        fatalError("cannot build the fuzz environments: \(error)")
    }
}()

/// One input; see above.
func fuzzProxySession(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    let setup = input.control()
    let chunking = input.control()
    let schedule = input.control()
    let payload = input.payload
    var client = payload
    var upstream: [UInt8] = []
    if let marker = payload.firstRange(of: upstreamMarker) {
        client = Array(payload[..<marker.lowerBound])
        upstream = Array(payload[marker.upperBound...])
    }
    var driver = Driver(
        session: ProxySession(id: 1, environment: environments[Int(setup & 3)], now: { 1_700_000_000 }),
        connectFails: setup & 4 != 0, viaBuffer: schedule & 1 != 0)
    if setup & 8 != 0 {
        let port = setup & 16 != 0 ? 80 : 443
        driver.start(driver.session.startTransparent(destinationAddress: "198.18.0.9", port: port))
    }
    var clientReads = reads(of: client, selector: chunking)[...]
    var upstreamReads = reads(of: upstream, selector: chunking >> 4)[...]

    while !driver.clientGone, !clientReads.isEmpty || (driver.upstreamOpen && !upstreamReads.isEmpty) {
        if let read = clientReads.popFirst() { driver.received(Array(read), from: .client) }
        if driver.connecting { driver.resolveConnect() }
        // Upstream bytes arrive between client reads, or only after the client has sent everything.
        if driver.upstreamOpen, schedule & 2 == 0 || clientReads.isEmpty, let read = upstreamReads.popFirst() {
            driver.received(Array(read), from: .upstream)
        }
    }
    if schedule & 4 != 0 { driver.handle(.timerFired(.requestHead)) }
    if schedule & 32 != 0 { driver.handle(.timerFired(.clientHello)) }
    if driver.connecting { driver.resolveConnect() }
    if schedule & 8 != 0 { driver.handle(.timerFired(.upstreamHandshake)) }
    if schedule & 16 != 0 { driver.handle(.stopping) }
    if driver.upstreamOpen { driver.handle(.upstreamEOF) }
    driver.handle(.clientEOF)
    if !driver.tunnelled { driver.handle(.clientClosed(error: nil)) }
    driver.checkNothingAfterTheEnd()
    return 0
}

/// The event loop's part: keeps the connection states the commands imply and records every command.
private struct Driver {
    let session: ProxySession
    let connectFails: Bool
    let viaBuffer: Bool
    var commands: [ProxyCommand] = []
    var connecting = false
    var upstreamOpen = false
    var clientGone = false
    var tunnelled = false

    init(session: ProxySession, connectFails: Bool, viaBuffer: Bool) {
        self.session = session
        self.connectFails = connectFails
        self.viaBuffer = viaBuffer
    }

    mutating func handle(_ event: ProxyEvent) { record(session.handle(event)) }

    /// What starting the session asked for (a transparent connection's start).
    mutating func start(_ out: [ProxyCommand]) { record(out) }

    /// Bytes as the loop hands them over: from its read buffer, or as an event.
    mutating func received(_ bytes: [UInt8], from peer: ProxyPeer) {
        if viaBuffer {
            record(bytes.withUnsafeBytes { session.handleReceived($0, from: peer) })
        } else {
            handle(peer == .client ? .clientBytes(bytes) : .upstreamBytes(bytes))
        }
    }

    mutating func resolveConnect() {
        connecting = false
        if connectFails {
            handle(.upstreamConnectFailed(error: "refused"))
        } else {
            upstreamOpen = true
            handle(.upstreamConnected)
        }
    }

    private mutating func record(_ out: [ProxyCommand]) {
        for command in out {
            switch command {
            case .connectUpstream: (connecting, upstreamOpen) = (true, false)
            case .closeUpstream: (connecting, upstreamOpen) = (false, false)
            case .closeClient, .resetClient: clientGone = true
            case .startTunnel: (clientGone, tunnelled) = (true, true)
            default: break
            }
        }
        commands += out
    }

    func checkNothingAfterTheEnd() {
        guard let end = commands.firstIndex(where: { $0 == .closeClient || $0 == .startTunnel }) else { return }
        let after = commands[(end + 1)...].filter {
            if case .log = $0 { false } else { $0 != .closeUpstream }
        }
        invariant(after.isEmpty, "the session asked for \(after) after \(commands[end])")
    }
}
