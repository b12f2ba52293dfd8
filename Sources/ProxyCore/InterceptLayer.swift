import ATSPolicy
import Foundation
import HTTP1Core
import Onboarding
import ProxyTrace
import TLSCore

// Theory of operation: interception of a CONNECT tunnel that carries TLS. The layer owns the client's TLS leg, the
// upstream's TLS leg and the relay between them; the steps live in files of their own:
//
// 1. The client's ClientHello has been parsed (SNI, ALPN) but not answered. The policy gives the requirements for
//    https://host:port; the upstream is connected and a TLS handshake runs offering exactly what iOS would
//    (UpstreamTLS.iOSLikeConfiguration).
// 2. If that handshake fails, a second, permissive connection learns what the server does support, so the
//    verdict can say why (and, in annotate mode, still carries the traffic).
// 3. The facts are judged (ATSPolicy.evaluate). Allowed, or `--ats annotate`: the client's handshake completes
//    with a leaf minted for the host and HTTP/1.1 is relayed. `--ats enforce --block tls`: the client's own handshake
//    fails the way the app's would: a fatal alert for version and cipher violations, a leaf with the same flaw for
//    certificate violations. `--block http`: the handshake completes and every request is answered 502.
//    VerdictAction makes the verdict an action; the outcome, annotation and block answer it sets are then the
//    action of every request on the connection.
// 4. The relay (HTTP/1.1, HTTP/2, or a translation between them, by what each side negotiated) carries the
//    exchanges; a 101 makes the layer relay raw plaintext both ways.
//
// Files: InterceptLayer+Upstream (connecting, retries, the upstream's end), InterceptLayer+Verdict (the upstream
// handshake and its verdict), InterceptLayer+Block (`--block tls`/`--block http`), InterceptLayer+Client (the
// client's handshake), InterceptLayer+Relaying (the relay and the TLS records each way), InterceptLayer+Lanes (the
// extra upstream connections of an h2 client relayed to an HTTP/1.1 origin).

/// An intercepted CONNECT: the client's TLS leg, the upstream's TLS leg and the relay between them.
final class InterceptLayer: RelayingLayer {
    /// The upstream attempts, in order: what iOS offers under the app's policy; in `--ats mirror`, what an iOS
    /// client with every exception offers (so the suite learned is the one the server chooses for iOS); then every
    /// version and suite this OpenSSL can negotiate.
    enum Attempt { case iOSLike, iOSWidest, permissive }
    enum Stage { case connectingUpstream, upstreamHandshake, clientHandshake, relaying, failed }

    let host: String
    let port: Int
    let hello: ClientHello
    /// What the client sent while the upstream connects or handshakes, fed to the client's TLS once it may start.
    /// Past `pendingClientLimit` the client is no longer read until then (`takePendingClientBytes`).
    var pendingClientBytes: [UInt8]
    var clientPausedWhileConnecting = false
    /// As a tunnel holds a client's early bytes (`TunnelLayer`): a slow upstream cannot make the proxy buffer more.
    static let pendingClientLimit = 64 * 1024
    let requirements: ConnectionRequirements?
    let decision: PolicyDecision
    var attempt: Attempt
    var stage: Stage = .connectingUpstream
    /// The upstream leg: its TLS client (nil before the TCP connection is up, and once the upstream is done with or
    /// given up), and whether its TCP connection is open (a close is owed to it, even with the TLS client gone).
    var upstream: TLSEngine?
    var upstreamOpen = false
    /// The client leg's TLS server (nil until the client's handshake is answered).
    var client: TLSEngine?
    /// The relay between the two legs' plaintext, once the client's handshake completed (nil while a retried
    /// upstream puts the client on hold).
    var relay: (any ExchangeRelay)?
    /// The exchange that switched protocols, while its connection is relayed raw (nil once logged).
    var upgraded: UpgradedConnection?
    /// What the relay waited for after its last step, with a deadline started for it (SessionContext+Deadlines).
    var watchedWait = RelayWait.nothing
    /// The failure of the iOS-like attempt, kept while the permissive probe runs.
    var iOSLikeFailure: TLSError?
    var violations: [ATSViolation] = [] { didSet { connectionRecord = nil } }
    /// Set in `--block http` mode, and after a block-by-certificate when the client accepted the flawed leaf anyway.
    var blockAnswer: ATSAnswer?
    /// The set-up site, when the CONNECT was to its name: every request is answered by it, with no upstream.
    var localSite: OnboardingSite?
    /// The flaw of the leaf `--block tls` served to reproduce a certificate violation.
    var flawedLeaf: String?
    /// Set when the client accepted that leaf anyway: why its requests get the block answer instead (console note).
    var blockFallback: String?
    /// The flawed-leaf refusal waits to be logged until the client has refused the leaf (its handshake fails, or
    /// it closes without a request): a client that accepts it gets the fallback note on its requests instead.
    var refusalToLog = false
    var annotation: [(String, String)] = []
    /// `--ats mirror`: the plan the client leg is served with and, once its handshake ended, what the device did.
    var mirror: MirrorState?
    var outcome: ExchangeSummary.ATSOutcome = .notEvaluated
    /// The relay switched protocols (101): plaintext is relayed raw both ways.
    var raw = false
    var upstreamFinished = false
    /// What the upstream chose by ALPN; the client is answered with the same when it offered it (ALPN mirroring).
    var upstreamALPN: String?
    /// The upstream refused the mirrored offer with no_application_protocol; the retry offers both protocols.
    var widenedALPN = false
    /// The client's first request asked to switch protocols and the upstream had chosen h2: the upstream is
    /// reconnected offering only http/1.1 (`retryUpstreamOverHTTP1`).
    var http1OnlyUpstream = false
    /// Requests sent again on a new connection after an upstream's GOAWAY refused them, since the last exchange that
    /// ended: an upstream that refuses every request gets a 502 after `maxRefusedRetries`, not a reconnect storm.
    var refusedRetries = 0
    static let maxRefusedRetries = 3
    /// The upstream's TLS client context and SNI, kept for the extra connections of an HTTP/1.1 upstream pool.
    var upstreamContext: TLSContext?
    var upstreamSNI: String?
    /// The client sent plaintext (a request) since its handshake.
    var clientSpoke = false
    /// When the client's handshake completed (the session's clock), for auto-passthrough's refusal window.
    var clientHandshakeDone: Double?
    /// Auto-passthrough has counted this connection as an acceptance or a refusal (once per connection).
    var trustJudged = false
    /// What the client sent before the upstream said anything (at most `replayLimit` bytes; nil once the upstream
    /// answered or the client sent more): a retried upstream gets it again.
    var unansweredClientPlaintext: [UInt8]? = []
    static let replayLimit = 64 << 10
    /// What the upstream was last offered by ALPN.
    var upstreamOffer: [String] = []
    /// Where the client side was when a retry of the upstream put it on hold (see
    /// `retryOfferingH2IfClosedBeforeRequest`).
    var resumeStage: Stage?
    /// Extra upstream connections (lanes) of an H2ToH1Relay, each with its own TLS client.
    var lanes: [UpstreamLane: LaneTLS] = [:]
    /// Upstream TCP connections made for this CONNECT so far: the first, then a probe or a retry (traced as
    /// attempts of their own).
    var connectAttempts = 0

    /// When the client's CONNECT was read (the session's clock): a connection-level block's duration runs from it.
    let started: Double
    /// The TLS of both legs, for the exchange records (SessionContext+Record).
    var legs = InterceptionLegs() { didSet { connectionRecord = nil } }
    /// The connection's record as its last exchange carried it (SessionContext+Record), kept while none of what it is
    /// made of changes: its exchanges then share one record's storage, which sinks compare by identity.
    var connectionRecord: ConnectionRecord?

    init(host: String, port: Int, hello: ClientHello, helloBytes: [UInt8], requirements: ConnectionRequirements?,
         decision: PolicyDecision, started: Double) {
        self.started = started
        self.host = host
        self.port = port
        self.hello = hello
        self.pendingClientBytes = helloBytes
        self.requirements = requirements
        self.decision = decision
        self.attempt = requirements == nil ? .permissive : .iOSLike
    }

    var exchangeRelay: (any ExchangeRelay)? { relay }

    /// `https://host[:port]`, made once: every request's URL starts with it.
    private(set) lazy var url: String = Self.httpsURL(host: host, port: port)

    /// `https://host[:port]` for a CONNECT target.
    static func httpsURL(host: String, port: Int) -> String {
        port == 443 ? "https://\(bracketed(host))" : "https://\(authority(host: host, port: port))"
    }

    /// `host:port`, as a CONNECT names its target.
    static func authority(host: String, port: Int) -> String { "\(bracketed(host)):\(port)" }

    /// An IPv6 literal needs brackets next to a port (RFC 3986 §3.2.2), or the port merges into the address.
    private static func bracketed(_ host: String) -> String {
        host.utf8.contains(UInt8(ascii: ":")) ? "[\(host)]" : host
    }
}

extension SessionContext {
    func startInterception(connectHost: String, port: Int, hello: ClientHello, helloBytes: [UInt8]) {
        // The name the app asked for is the SNI; IP hosts send none, so the CONNECT host stands in. An SNI that is
        // no DNS name (some clients send `host:port`) is not trusted either.
        let sni = hello.serverName.map { $0.lowercased() }
        let host = sni.flatMap { Self.isPlausibleDNSName($0) ? $0 : nil } ?? connectHost.lowercased()
        if let sni, sni != host {
            notice("\(connectHost):\(port): the client sent the SNI '\(sni)', which is no host name; using \(host)")
        }
        // Auto-passthrough's key, fetched while the connection is surely open (SessionContext+AutoPassthrough).
        if env.autoPassthrough != nil { _ = clientHost() }
        if startOnboardingTLS(host: host, port: port, hello: hello, helloBytes: helloBytes) { return }
        var requirements: ConnectionRequirements?
        var decision = PolicyDecision(keyPath: [], reason: "ATS evaluation is off (--ats off)")
        if env.mode != .off {
            switch env.requirements(for: ConnectionTarget(scheme: "https", host: host, port: port)) {
            case .proceed(let r):
                requirements = r
                decision = r.decidedBy
            case .blocked(let v):
                // https is never refused before connecting; keep the engine's word if it ever is.
                decision = v.decidedBy ?? PolicyDecision(keyPath: [], reason: v.explanation)
            }
        }
        let i = InterceptLayer(
            host: host, port: port, hello: hello, helloBytes: helloBytes, requirements: requirements,
            decision: decision, started: now())
        phase = .intercepting(i)
        connectInterceptionUpstream(i, reason: nil)
    }

    /// Letters, digits, hyphens, underscores and dots: what a TLS server_name may hold (RFC 6066 §3).
    static func isPlausibleDNSName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 253
            && name.utf8.allSatisfy { c in
                (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x2E || c == 0x5F
            }
    }
}
