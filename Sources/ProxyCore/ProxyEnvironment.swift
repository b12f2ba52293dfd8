import ATSPolicy
import Foundation
import ProxyTrace
import RuleStage
import TLSCore
import TrafficActions

/// Everything sessions share: the policy, the options and the TLS machinery. Immutable after start, so one
/// value serves every loop thread; the caches inside lock for themselves.
public final class ProxyEnvironment: Sendable {
    public let policy: ATSPolicy
    public let mode: ATSMode
    public let blockStyle: BlockStyle
    /// `--map`: where to connect for the hosts each pattern covers.
    public let mappings: HostPatternTable<HostMapping>
    /// `--passthrough`: hosts tunnelled without interception.
    public let passthrough: HostPatternTable<Void>
    public let credentials: ProxyCredentials?
    public let minter: LeafMinter
    public let factsCollector: HandshakeFactsCollector
    /// 0 = no CFNetwork-style records; 1–3 as `CFNETWORK_DIAGNOSTICS`.
    public let diagnosticsLevel: Int
    /// Whether sessions make each exchange's own trace records (`RebuiltTrace`): false when only a capture wants
    /// them (`RecordingOptions.rebuildsExchangeTraces`), which rebuilds them when read.
    public let exchangeTraces: Bool
    /// Whether the adapter writes JSON events (sessions skip building them otherwise).
    public let jsonEvents: Bool
    /// Connect, handshake and idle limits.
    public let timeouts: Timeouts
    /// What the upstream is offered by ALPN.
    public let upstreamALPN: UpstreamALPN
    /// Upstream TLS sessions to resume, with the certificate facts they were first judged on; nil with
    /// `--upstream-resumption off`.
    public let upstreamSessions: TLSSessionCache?
    /// `--insecure-upstream` (with `--ats off` only): relay an upstream whose certificate the device would not
    /// trust (unknown root, wrong name), with a notice each time, instead of failing the client as the device would.
    public let insecureUpstream: Bool
    /// What the device checks with ATS out of the way (`NSAllowsArbitraryLoads`): the chain's trust, the name, and
    /// the rules iOS applies to every TLS connection. `--ats off` still judges every upstream by it.
    let defaultTrustPolicy: ATSPolicy
    /// What the sinks want recorded of each exchange beyond its console line; nil records nothing more.
    public let recording: RecordingOptions?
    /// `--ats mirror --plist P`: every mirrored connection gets two verdicts, the policy's and the device's.
    public let mirrorComparesPolicy: Bool
    /// `--ats mirror`: what the devices did, counted for the summary at exit.
    public let mirrorTally = MirrorTally()
    /// `--mode transparent`: the devices' QUIC attempts refused (QUICRefusal).
    public let quicRefusals = QUICRefusals()
    /// Hosts each client keeps refusing the proxy's certificate for, tunnelled from then on; nil with
    /// `--no-auto-passthrough`.
    public let autoPassthrough: AutoPassthroughStore?
    /// The set-up site answered on `atsproxy.invalid` and the proxy's own address; nil serves none.
    public let localSite: (any LocalSite)?
    /// Apple's own hosts, tunnelled without interception; nil with `--intercept-apple-hosts`.
    public let appleHosts: AppleHosts?
    /// The rules that change traffic (`--rules`, `--map-local`, `--fault`…); nil when there are none, which costs
    /// the relaying path nothing.
    public let rules: RuleBook?
    /// How much of a response body a body rule holds before it lets the body go on unchanged (`HeldBody`).
    public let ruleBodyLimit: Int
    /// The exchanges breakpoints hold now (issue 34), where the web view lists and releases them.
    public let holds = HoldRegistry()
    /// `--breakpoint-timeout`: how long a breakpoint holds an exchange before it goes on unchanged.
    public let breakpointTimeout: Duration
    /// How map local and answers read their files.
    let ruleFiles: any FileReading = POSIXFileReader()
    let contexts = TLSContextCache()
    let h2OnlyOrigins = H2OnlyOrigins()
    /// Pin checks of tunnelled NSPinnedDomains hosts, per origin (TunnelLayer+PinCheck).
    let pinChecks = PinCheckCache()
    private let verdicts = RequirementsCache()

    /// `policy.requirements(for:)`, evaluated once per target.
    func requirements(for target: ConnectionTarget) -> PreConnectVerdict {
        verdicts.verdict(for: target) { policy.requirements(for: target) }
    }

    public struct Timeouts: Sendable {
        public var connect: Duration
        /// The upstream's TLS handshake (`--handshake-timeout`).
        public var handshake: Duration
        public var idle: Duration
        /// What a client owes once it started (`--client-timeout`): each request head from its first byte, the TLS
        /// ClientHello after CONNECT, its TLS handshake, and each request body byte after the last (inactivity).
        public var client: Duration
        /// From a request's end to the upstream's first response byte (`--response-timeout`).
        public var response: Duration
        public init(
            connect: Duration = .seconds(10), handshake: Duration = .seconds(15), idle: Duration = .seconds(120),
            client: Duration = .seconds(30), response: Duration = .seconds(60)
        ) {
            self.connect = connect
            self.handshake = handshake
            self.idle = idle
            self.client = client
            self.response = response
        }
    }

    public init(
        policy: ATSPolicy, mode: ATSMode, blockStyle: BlockStyle, mappings: [HostMapping], passthrough: [HostPattern],
        credentials: ProxyCredentials?, minter: LeafMinter, factsCollector: HandshakeFactsCollector,
        diagnosticsLevel: Int, jsonEvents: Bool, timeouts: Timeouts = .init(), upstreamALPN: UpstreamALPN = .mirror,
        upstreamResumption: UpstreamResumption = .on, insecureUpstream: Bool = false,
        recording: RecordingOptions? = nil, localSite: (any LocalSite)? = nil,
        appleHosts: AppleHosts? = .builtIn, autoPassthrough: AutoPassthroughStore? = nil,
        mirrorComparesPolicy: Bool = false, rules: RuleBook? = nil, ruleBodyLimit: Int = BodyEdits.limit,
        breakpointTimeout: Duration = .seconds(60)
    ) {
        self.rules = rules
        self.breakpointTimeout = breakpointTimeout
        self.ruleBodyLimit = ruleBodyLimit
        self.localSite = localSite
        self.appleHosts = appleHosts
        self.policy = policy
        self.mirrorComparesPolicy = mirrorComparesPolicy
        self.autoPassthrough = autoPassthrough
        self.recording = recording
        self.exchangeTraces = !(recording?.rebuildsExchangeTraces ?? false)
        self.insecureUpstream = insecureUpstream
        self.defaultTrustPolicy = ATSPolicy(
            atsDictionary: .dictionary(PlistDictionary([(key: "NSAllowsArbitraryLoads", value: .bool(true))])),
            options: policy.options)
        self.mode = mode
        self.blockStyle = blockStyle
        self.mappings = HostPatternTable(mappings.map { ($0.pattern, $0) })
        self.passthrough = HostPatternTable(passthrough.map { ($0, ()) })
        self.credentials = credentials
        self.minter = minter
        self.factsCollector = factsCollector
        self.diagnosticsLevel = diagnosticsLevel
        self.jsonEvents = jsonEvents
        self.timeouts = timeouts
        self.upstreamALPN = upstreamALPN
        self.upstreamSessions = upstreamResumption == .on ? TLSSessionCache() : nil
    }

    /// Where to connect for `host:port`: the `--map` target, or the host itself.
    func upstreamAddress(host: String, port: Int) -> (address: String, port: Int) {
        if let m = mappings.lookup(host)?.value { return (m.address, m.port) }
        return (host, port)
    }

    /// The `--passthrough` pattern that covers `host`, if any.
    func passthroughRule(for host: String) -> HostPattern? {
        passthrough.lookup(host)?.pattern
    }
}

/// What tells TLS contexts apart: the upstream ClientHello's shape, or the minted identity a client is served.
enum TLSContextKey: Hashable {
    case upstream(minimum: TLSVersion?, maximum: TLSVersion?, cipherList: String?, tls13Suites: String?, alpn: [String])
    case server(host: String, leaf: LeafOptions)
    /// `--ats mirror`: the client leg for an upstream with weaknesses to reproduce.
    case mirror(host: String, plan: MirrorPlan)
}

/// TLS contexts are costly to build (cipher parsing, key loading), and a proxy needs few distinct ones: one per
/// upstream requirement shape and one per minted identity. Bounded: cleared when full, rebuilt on demand.
final class TLSContextCache: @unchecked Sendable {
    // @unchecked: every access to `contexts` holds `lock`.
    private let lock = NSLock()
    private var contexts: [TLSContextKey: TLSContext] = [:]
    private let capacity = 512

    func context(key: TLSContextKey, make: () throws(OpenSSLError) -> TLSContext) throws(OpenSSLError) -> TLSContext {
        lock.lock()
        if let c = contexts[key] {
            lock.unlock()
            return c
        }
        lock.unlock()
        let made = try make()
        lock.lock()
        defer { lock.unlock() }
        if contexts.count >= capacity { contexts.removeAll(keepingCapacity: true) }
        contexts[key] = made
        return made
    }
}
