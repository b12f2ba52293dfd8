import ATSPolicy
import CaptureStore
import Foundation
import ProxyCore
import ProxyTrace
import TLSCore

// The user-space cost of the proxy's protocol core per request, without sockets or a kernel: an in-memory TLS
// client and an in-memory TLS origin exchange keep-alive requests through a `ProxySession` (CONNECT, both
// handshakes, ATS evaluated in enforce mode), and the same client and origin work is timed again without the
// session in between. The difference is what the proxy adds in user space; system calls and loopback delivery come
// on top (see benchmarks/proxybench.py for the whole). Single-threaded and deterministic in its work, so it can
// tell small changes apart where the socket benchmark on a shared 2-core machine cannot.
//
// Usage: proxycore-bench [--requests N] [--rounds R] [--connections N] [--body BYTES] [--capture 0|1|2]
// (--body sets the response body's size, 1 KiB by default: large bodies count the download path. --capture sets
// the session up as `run --capture` does, bodies kept up to 1 MiB: 1 with each exchange's own trace records made
// (as with --diagnostics 1), 2 with them left to the capture's reader (as without --diagnostics); 0, the default:
// no capture. With a capture, each logged entry is also encoded as the capture's sink does on a loop thread
// (`CaptureEncoder`, into a batch emptied as the writer would), so the count covers the loop threads' whole share.)

struct Options {
    var requests = 20_000
    var rounds = 5
    var connections = 200
    var body = 1024
    var capture = 0

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            guard let value = rest.popFirst().flatMap(Int.init), value > 0 || (flag == "--capture" && value == 0)
            else {
                throw BenchmarkError("\(flag) needs a positive number")
            }
            switch flag {
            case "--requests": requests = value
            case "--rounds": rounds = value
            case "--connections": connections = value
            case "--body": body = value
            case "--capture" where value <= 2: capture = value
            default: throw BenchmarkError("unknown option \(flag)")
            }
        }
    }
}

struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A response of `bodySize` bytes with the head nginx sends for a static file.
func makeResponse(bodySize: Int) -> [UInt8] {
    let head = "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 22 Nov 2026 19:00:00 GMT\r\n"
        + "Content-Type: application/octet-stream\r\nContent-Length: \(bodySize)\r\n"
        + "Last-Modified: Sun, 22 Nov 2026 18:00:00 GMT\r\nConnection: keep-alive\r\nETag: \"6740c2a0-400\"\r\n"
        + "Accept-Ranges: bytes\r\n\r\n"
    return Array(head.utf8) + (0..<bodySize).map { UInt8(truncatingIfNeeded: $0 &* 31) }
}

/// The request `hey` sends.
let requestBytes = Array(
    "GET /1k HTTP/1.1\r\nHost: bench.test:443\r\nUser-Agent: hey/0.0.1\r\nContent-Type: text/html\r\nAccept-Encoding: gzip\r\n\r\n"
        .utf8)

/// Handles `event` and returns everything the session sent to each side.
func collect(_ session: ProxySession, _ event: ProxyEvent) -> (toClient: [UInt8], toUpstream: [UInt8]) {
    collect(session, session.handle(event))
}

/// Hands `bytes` to the session the way the server does (from its read buffer) and returns what it sent.
func collect(_ session: ProxySession, received bytes: [UInt8], from peer: ProxyPeer)
    -> (toClient: [UInt8], toUpstream: [UInt8])
{
    collect(session, bytes.withUnsafeBytes { session.handleReceived($0, from: peer) })
}

private func collect(_ session: ProxySession, _ commands: consuming [ProxyCommand])
    -> (toClient: [UInt8], toUpstream: [UInt8])
{
    var toClient: [UInt8] = []
    var toUpstream: [UInt8] = []
    for command in copy commands {
        switch command {
        case .sendToClient(let bytes): toClient += bytes
        case .sendToUpstream(let bytes): toUpstream += bytes
        case .log(let entry) where CaptureEncoding.enabled: CaptureEncoding.shared.encode(entry)
        default: break
        }
    }
    // As the server does: the command array goes back to the session for the next event.
    session.recycle(consume commands)
    return (toClient, toUpstream)
}

/// What `CaptureSink` does with each entry on the loop thread, without its lock and writer.
final class CaptureEncoding: @unchecked Sendable {
    // @unchecked: the benchmark is one thread.
    static let shared = CaptureEncoding()
    nonisolated(unsafe) static var enabled = false
    private var encoder = CaptureEncoder()
    private var batch = CaptureBatch()

    @inline(never) func encode(_ entry: ProxyLog) {
        switch entry {
        case .exchange(let exchange): encoder.append(.exchange(exchange), to: &batch)
        case .diagnostics(let record): encoder.append(.trace(record, time: 0), to: &batch)
        case .event, .notice: return
        }
        if batch.byteCount > 1 << 20 { batch.removeAll() }
    }
}

/// Reads all the plaintext an engine can give now.
func drain(_ engine: TLSEngine) throws -> [UInt8] {
    var plaintext: [UInt8] = []
    for _ in 0..<65_536 {  // up to 1 GiB
        switch engine.read() {
        case .data(let piece): plaintext += piece
        case .needsMoreInput: return plaintext
        case .closed: throw BenchmarkError("closed")
        case .failed(let error): throw BenchmarkError("TLS read failed: \(error)")
        }
    }
    return plaintext
}

/// The fixed parts: a CA the proxy mints with, an origin identity it trusts, and the session environment.
struct Scene {
    let env: ProxyEnvironment
    let originContext: TLSContext
    let clientContext: TLSContext

    init(capture: Int = 0) throws {
        let authority = try CertificateAuthority.create(commonName: "proxycore-bench CA")
        let minter = LeafMinter(authority: authority)
        env = ProxyEnvironment(
            policy: ATSPolicy(atsDictionary: .dictionary(PlistDictionary())), mode: .enforce, blockStyle: .tls,
            mappings: [try HostMapping(parsing: "bench.test=127.0.0.1:443")], passthrough: [], credentials: nil,
            minter: minter,
            factsCollector: HandshakeFactsCollector(
                trust: try TrustEvaluator(useSystemRoots: false, userRoots: [authority.certificate])),
            diagnosticsLevel: capture == 0 ? 0 : 1, jsonEvents: false,
            recording: capture == 0 ? nil : RecordingOptions(bodyLimit: 1 << 20, rebuildsExchangeTraces: capture == 2))
        originContext = try TLSContext(.server(identity: try minter.identity(for: "bench.test"), alpn: ["http/1.1"]))
        clientContext = try TLSContext(.client(alpn: ["http/1.1"]))
    }

    /// A client connection through a new session: CONNECT and both handshakes done.
    func connect() throws -> (session: ProxySession, client: TLSEngine, origin: TLSEngine) {
        let session = ProxySession(id: 1, environment: env, now: { Date().timeIntervalSince1970 })
        let client = try TLSEngine(context: clientContext, serverName: "bench.test")
        let origin = try TLSEngine(context: originContext)
        _ = session.handle(.clientBytes(Array("CONNECT bench.test:443 HTTP/1.1\r\nHost: bench.test:443\r\n\r\n".utf8)))
        _ = client.handshake()
        _ = session.handle(.clientBytes(client.takeOutput()))
        var toOrigin = collect(session, .upstreamConnected).toUpstream
        var toClient: [UInt8] = []
        for _ in 0..<10 where !toOrigin.isEmpty {
            origin.feed(toOrigin)
            _ = origin.handshake()
            let sent = collect(session, received: origin.takeOutput(), from: .upstream)
            toClient += sent.toClient
            toOrigin = sent.toUpstream
        }
        for _ in 0..<10 where !toClient.isEmpty {
            client.feed(toClient)
            _ = client.handshake()
            toClient = collect(session, received: client.takeOutput(), from: .client).toClient
        }
        guard client.isHandshakeComplete, origin.isHandshakeComplete else {
            throw BenchmarkError("the handshakes through the session did not complete (blocked?)")
        }
        return (session, client, origin)
    }

    /// A client connected straight to an origin.
    func direct() throws -> (client: TLSEngine, origin: TLSEngine) {
        let client = try TLSEngine(context: clientContext, serverName: "bench.test")
        let origin = try TLSEngine(context: originContext)
        _ = client.handshake()
        for _ in 0..<10 where client.hasOutput || origin.hasOutput {
            origin.feed(client.takeOutput())
            _ = origin.handshake()
            client.feed(origin.takeOutput())
            _ = client.handshake()
        }
        guard client.isHandshakeComplete, origin.isHandshakeComplete else {
            throw BenchmarkError("the direct handshake did not complete")
        }
        return (client, origin)
    }
}

/// One request and its response through the session; returns the response bytes the client got.
func exchangeThroughSession(
    _ session: ProxySession, _ client: TLSEngine, _ origin: TLSEngine, response: [UInt8]
) throws -> Int {
    try client.write(requestBytes)
    origin.feed(collect(session, received: client.takeOutput(), from: .client).toUpstream)
    guard try drain(origin).count == requestBytes.count else { throw BenchmarkError("the origin got a different request") }
    try origin.write(response)
    client.feed(collect(session, received: origin.takeOutput(), from: .upstream).toClient)
    return try drain(client).count
}

/// The same client and origin work without the session.
func exchangeDirect(_ client: TLSEngine, _ origin: TLSEngine, response: [UInt8]) throws -> Int {
    try client.write(requestBytes)
    origin.feed(client.takeOutput())
    guard try drain(origin).count == requestBytes.count else { throw BenchmarkError("the origin got a different request") }
    try origin.write(response)
    client.feed(origin.takeOutput())
    return try drain(client).count
}

func microseconds(_ duration: Duration, per count: Int) -> Double {
    let c = duration.components
    return (Double(c.seconds) * 1e6 + Double(c.attoseconds) / 1e12) / Double(count)
}

func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

func run() throws {
    let options = try Options(Array(CommandLine.arguments.dropFirst()))
    let scene = try Scene(capture: options.capture)
    CaptureEncoding.enabled = options.capture > 0
    let clock = ContinuousClock()
    let (session, client, origin) = try scene.connect()
    let (directClient, directOrigin) = try scene.direct()
    let response = makeResponse(bodySize: options.body)
    guard try exchangeThroughSession(session, client, origin, response: response) == response.count else {
        throw BenchmarkError("the response through the session is not byte-exact in length")
    }
    var proxied: [Double] = []
    var direct: [Double] = []
    var connections: [Double] = []
    for _ in 0..<options.rounds {
        let a = try clock.measure {
            for _ in 0..<options.requests {
                _ = try exchangeThroughSession(session, client, origin, response: response)
            }
        }
        let b = try clock.measure {
            for _ in 0..<options.requests { _ = try exchangeDirect(directClient, directOrigin, response: response) }
        }
        proxied.append(microseconds(a, per: options.requests))
        direct.append(microseconds(b, per: options.requests))
        let c = try clock.measure {
            for _ in 0..<options.connections {
                let (s, cl, o) = try scene.connect()
                _ = try exchangeThroughSession(s, cl, o, response: response)
            }
        }
        connections.append(microseconds(c, per: options.connections))
    }
    let added = zip(proxied, direct).map { $0 - $1 }
    print("proxy core, user space, one thread (\(options.rounds) rounds of \(options.requests) keep-alive requests, "
        + "\(options.body)-byte response bodies, HTTPS intercepted, ATS enforce):")
    print(String(format: "  client+origin+session   %7.2f µs/request (median; min %.2f)", median(proxied), proxied.min() ?? 0))
    print(String(format: "  client+origin directly  %7.2f µs/request (median; min %.2f)", median(direct), direct.min() ?? 0))
    print(String(format: "  added by the session    %7.2f µs/request (median of per-round differences)", median(added)))
    print(String(format: "  new intercepted connection with one request: %.0f µs (median of %d rounds of %d; "
        + "includes the client's and origin's handshakes)", median(connections), options.rounds, options.connections))
}

do { try run() } catch {
    FileHandle.standardError.write(Data("proxycore-bench: \(error)\n".utf8))
    exit(1)
}
