import ATSPolicy
import Foundation
import HTTP1Core
import ProxyTrace
import TLSCore

// Theory of operation: interception of a CONNECT tunnel that carries TLS. The layer owns the client's TLS leg, the
// upstream's TLS leg and the relay between them; the steps live in files of their own:
//
// 1. The client's ClientHello has been parsed (SNI, ALPN) but not answered. The policy gives the requirements for
//    https://host:port; the upstream is connected and a TLS handshake runs offering exactly what iOS would
//    (UpstreamTLS.iOSLikeConfiguration).
// 2. If that handshake fails, the upstream leg probes (`UpstreamLeg.nextProbe`): in `--ats mirror` what iOS offers
//    with every exception, then a permissive connection that learns what the server does support, so the verdict
//    can say why (and, in annotate mode, still carries the traffic). An ALPN refusal is retried offering h2 and
//    http/1.1 instead (`UpstreamLeg.widenAfterALPNRefusal`).
// 3. The facts are judged (ATSPolicy.evaluate). Allowed, or `--ats annotate`: the client's handshake completes
//    with a leaf minted for the host and HTTP/1.1 is relayed. `--ats enforce --block tls`: the client's own handshake
//    fails the way the app's would: a fatal alert for version and cipher violations, a leaf with the same flaw for
//    certificate violations. `--block http`: the handshake completes and every request is answered 502.
//    VerdictAction makes the verdict an action; the outcome, annotation and block answer it sets are then the
//    action of every request on the connection.
// 4. The relay (HTTP/1.1, HTTP/2, or a translation between them, by what each side negotiated) carries the
//    exchanges; a 101 makes the layer relay raw plaintext both ways.
//
// Parts: the upstream leg (UpstreamLeg: connection, TLS client, ALPN offered and chosen, attempts, retries), the
// client leg (ClientLeg: TLS server, the bytes held until it may start, what it said) and the block state
// (BlockState); the layer keeps the stage, the relay, the verdict and the records. Every method takes the session's
// context (SessionContext) first: it emits commands, logs and ends the connection through it.
//
// Files: InterceptLayer+Upstream (UpstreamLeg; connecting, retries, the upstream's end), InterceptLayer+Verdict (the
// upstream handshake and its verdict), InterceptLayer+Block (BlockState; `--block tls`/`--block http`),
// InterceptLayer+Client (ClientLeg; the client's handshake), InterceptLayer+Relaying (the relay and the TLS records
// each way), InterceptLayer+Lanes (the extra upstream connections of an h2 client relayed to an HTTP/1.1 origin),
// InterceptLayer+Mirror (`--ats mirror`), InterceptLayer+Fault (a failure a rule injects). Interception starts in
// SessionContext+Transitions.

/// An intercepted CONNECT: the client's TLS leg, the upstream's TLS leg and the relay between them.
final class InterceptLayer: RelayingLayer {
    enum Stage { case connectingUpstream, upstreamHandshake, clientHandshake, relaying, failed }

    let host: String
    let port: Int
    let hello: ClientHello
    let requirements: ConnectionRequirements?
    let decision: PolicyDecision
    /// When the client's CONNECT was read (the session's clock): a connection-level block's duration runs from it.
    let started: Double
    /// `https://host[:port]`: every request's URL starts with it.
    let url: String
    /// The upstream leg: its connection, TLS client, ALPN and attempts (InterceptLayer+Upstream).
    let upstream: UpstreamLeg
    /// The client leg: its TLS server and what it sent so far (InterceptLayer+Client).
    let client: ClientLeg

    var stage: Stage = .connectingUpstream
    /// The relay between the two legs' plaintext, once the client's handshake completed (nil while a retried
    /// upstream puts the client on hold).
    var relay: (any ExchangeRelay)?
    /// The exchange that switched protocols, while its connection is relayed raw (nil once logged).
    var upgraded: UpgradedConnection?
    /// The relay switched protocols (101): plaintext is relayed raw both ways.
    var raw = false
    /// What the relay waited for after its last step, with a deadline started for it (SessionContext+Deadlines).
    var watchedWait = RelayWait.nothing
    var violations: [ATSViolation] = [] { didSet { connectionRecord = nil } }
    var outcome: ExchangeSummary.ATSOutcome = .notEvaluated
    var annotation: [(String, String)] = []
    /// How the connection is refused, when it is (InterceptLayer+Block).
    var block = BlockState()
    /// The set-up site, when the CONNECT was to its name: every request is answered by it, with no upstream.
    var localSite: (any LocalSite)?
    /// `--ats mirror`: the plan the client leg is served with and, once its handshake ended, what the device did.
    var mirror: MirrorState?
    /// A rule fails this connection on purpose: no upstream, a flawed server or silence (InterceptLayer+Fault).
    var fault: FaultState?
    /// Extra upstream connections (lanes) of an H2ToH1Relay, each with its own TLS client.
    var lanes: [UpstreamLane: LaneTLS] = [:]
    /// The TLS of both legs, for the exchange records (SessionContext+Record).
    var legs = InterceptionLegs() { didSet { connectionRecord = nil } }
    /// The connection's record as its last exchange carried it (SessionContext+Record), kept while none of what it
    /// is made of changes: its exchanges then share one record's storage, which sinks compare by identity.
    var connectionRecord: ConnectionRecord?

    init(host: String, port: Int, hello: ClientHello, helloBytes: [UInt8], requirements: ConnectionRequirements?,
         decision: PolicyDecision, started: Double) {
        self.started = started
        self.host = host
        self.port = port
        self.hello = hello
        self.requirements = requirements
        self.decision = decision
        url = Self.httpsURL(host: host, port: port)
        upstream = UpstreamLeg(host: host, port: port, attempt: requirements == nil ? .permissive : .iOSLike)
        client = ClientLeg(pendingBytes: helloBytes)
    }

    var exchangeRelay: (any ExchangeRelay)? { relay }

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
