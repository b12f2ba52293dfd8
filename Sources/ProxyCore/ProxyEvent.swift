import ATSPolicy
import ProxyTrace
import Throttle

/// What happens to one proxy session (a client connection and the upstream connection it leads to).
/// The event loop adapter turns socket readiness into these; nothing here touches a file descriptor.
public enum ProxyEvent: Sendable {
    case clientBytes([UInt8])
    /// The client sent FIN.
    case clientEOF
    /// The client connection is gone (reset, or closed after both directions ended).
    case clientClosed(error: String?)
    /// The upstream TCP connection asked for with `.connectUpstream` is open.
    case upstreamConnected
    /// The connect asked for failed (refused, timed out, name not resolved).
    case upstreamConnectFailed(error: String, failure: ConnectFailure = .cannotConnect)
    case upstreamBytes([UInt8])
    case upstreamEOF
    case upstreamClosed(error: String?)
    /// Events of the session's extra upstream connections (`connectLane`), used when an HTTP/2 client is relayed
    /// to an HTTP/1.1 upstream: one exchange at a time per connection, so several connections carry its streams.
    case laneConnected(UpstreamLane)
    case laneConnectFailed(UpstreamLane, error: String)
    case laneBytes(UpstreamLane, [UInt8])
    case laneEOF(UpstreamLane)
    case laneClosed(UpstreamLane, error: String?)
    /// The connection to `peer` carried nothing for a while: a moment to give back memory only traffic needs.
    case peerQuiet(ProxyPeer)
    /// The raw tunnel started with `.startTunnel` is over: both connections closed, after relaying these bytes.
    case tunnelClosed(fromClient: Int, toClient: Int)
    /// The first bytes either side sent into the raw tunnel, while `ProxySession.watchesTunnel` says so.
    case tunnelBytes(fromClient: Bool, [UInt8])
    /// The proxy is shutting down gracefully: the exchange in flight may finish until the shutdown's deadline, when
    /// the connections still open are closed (and their exchanges logged as cut off by the shutdown).
    case stopping
    /// A deadline asked for with `ProxyCommand.startTimer` passed.
    case timerFired(ProxyTimer)
    /// The adapter stopped (true) or resumed (false) reading the client because an upstream's or a lane's write
    /// buffer filled or drained (not a pause the session asked for); sent on transitions only. While held, the
    /// client's request bodies and header blocks wait for the proxy, so their deadlines are suspended.
    case clientReadingHeld(Bool)
    /// A person released the exchange a breakpoint held (`ProxyCommand.hold`), through the hold registry.
    case holdReleased(UInt64, HoldRelease)
}

/// A deadline a session asks its adapter to keep (the session has no clock of its own to wait on).
public enum ProxyTimer: Hashable, Sendable {
    /// The upstream's TLS handshake must finish by then: a server that accepts the connection and never answers
    /// would otherwise hold the client until its idle timeout, with nothing logged.
    case upstreamHandshake
    /// A request head must be complete by then, from its first byte (a partial head would otherwise hold the
    /// connection, silently, until the idle timeout): the connection's first, and each later one.
    case requestHead
    /// After a CONNECT was answered 200, the client's TLS ClientHello must have arrived by then.
    case clientHello
    /// The client's TLS handshake with the proxy must be finished by then.
    case clientHandshake
    /// A request body must make progress (a byte) within the limit; checked when this fires.
    case requestBody
    /// The upstream must have started its response by then, counted from the request's end.
    case response
    /// The earliest deadline of an h2 client's streams (StreamDeadlines) falls then.
    case streamDeadlines
    /// A breakpoint's hold (by its id) ran out (`--breakpoint-timeout`): the exchange goes on unchanged.
    case hold(UInt64)
}

/// Why a connect failed, told apart as the app's URL loading would report it.
public enum ConnectFailure: Sendable, Equatable {
    /// The name did not resolve: NSURLErrorCannotFindHost.
    case cannotFindHost
    /// Refused or unreachable: NSURLErrorCannotConnectToHost.
    case cannotConnect
    /// No answer in time: NSURLErrorTimedOut.
    case timedOut

    public var urlError: URLErrorCode {
        switch self {
        case .cannotFindHost: .cannotFindHost
        case .cannotConnect: .cannotConnectToHost
        case .timedOut: .timedOut
        }
    }
}

/// Names one extra upstream connection of a session. Numbers are never reused within a session, so a late event
/// of a closed lane cannot be taken for a new one's.
public struct UpstreamLane: Hashable, Sendable, CustomStringConvertible {
    public let number: Int
    public init(_ number: Int) { self.number = number }
    public var description: String { "lane \(number)" }
}

/// A connection of a session whose reading the session can pause.
public enum ProxyPeer: Hashable, Sendable {
    case client
    case upstream
    case lane(UpstreamLane)
}

/// What a session asks the event loop adapter to do, in order.
public enum ProxyCommand: Sendable, Equatable {
    case sendToClient([UInt8])
    case sendToUpstream([UInt8])
    /// Open a TCP connection to `address:port` (a name is resolved by the adapter). Only one upstream exists at a
    /// time; the session closes the old one first.
    case connectUpstream(address: String, port: Int)
    /// FIN after the queued bytes.
    case shutdownClientWrite
    case shutdownUpstreamWrite
    /// Close after the queued bytes are written.
    case closeClient
    /// Close with a TCP reset after the queued bytes are handed to the kernel: the client must see its connection
    /// fail, as it would have directly, because the response in flight was cut off.
    case resetClient
    case closeUpstream
    /// Open an extra upstream connection (see `ProxyEvent.laneConnected`).
    case connectLane(UpstreamLane, address: String, port: Int)
    case sendToLane(UpstreamLane, [UInt8])
    case closeLane(UpstreamLane)
    /// Stop or restart reading a connection: the other side's flow control (HTTP/2 windows), not a socket
    /// buffer, is what is full, so only the session knows. Socket-level backpressure never resumes what the session
    /// paused.
    case pauseReading(ProxyPeer)
    case resumeReading(ProxyPeer)
    /// Hand both connections to a raw byte relay (passthrough and non-TLS tunnels): the session is done.
    case startTunnel
    /// Deliver `.timerFired(timer)` after `after`, replacing a pending one of the same kind.
    case startTimer(ProxyTimer, after: Duration)
    /// Shape this connection from now on (a throttle rule holds for it): the client leg's writes as the link's
    /// downlink, the upstream's and the lanes' as its uplink; wait the DNS delay before each upstream connect; with
    /// 100% loss, pass nothing and connect nothing. Given once, before the first upstream connect.
    case throttle(ThrottleOrder)
    /// A breakpoint holds this exchange: list it in the hold registry (`ProxyEnvironment.holds`) with a `deliver`
    /// that posts `.holdReleased` to this session on its own loop. The session's connection must not idle out
    /// while it is held.
    case hold(HeldExchange)
    /// The session went on without a release (its hold timed out): take the exchange off the registry.
    case unhold(UInt64)
    case log(ProxyLog)
}

/// How to shape a connection (`ProxyCommand.throttle`): the profile, and the link it shares with every other
/// connection the same rule covers (a throttle for the whole proxy), or nil for a link of its own.
public struct ThrottleOrder: Sendable, Equatable, CustomStringConvertible {
    public let profile: LinkProfile
    public let sharedLink: SharedLink?

    public init(profile: LinkProfile, sharedLink: SharedLink?) {
        self.profile = profile
        self.sharedLink = sharedLink
    }

    /// Equal profiles, and the same shared buckets (or none).
    public static func == (a: ThrottleOrder, b: ThrottleOrder) -> Bool {
        a.profile == b.profile && a.sharedLink?.downlink === b.sharedLink?.downlink
            && a.sharedLink?.uplink === b.sharedLink?.uplink && (a.sharedLink == nil) == (b.sharedLink == nil)
    }

    public var description: String { profile.description + (sharedLink == nil ? "" : " (whole proxy)") }
}
