import ATSPolicy
import TLSCore
import Testing

@testable import ProxyCore

/// A playbook test of one `ProxySession`, after mitmproxy's `tutils.Playbook`: events go in (`>>`), and the
/// commands that come out are checked in order against what the playbook expects (`<<`).
///
///     pb >> .clientBytes(bytes("CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n"))
///     pb << .startTimer(.requestHead)
///     pb << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
///     pb << .startTimer(.clientHello)
///     pb >> .clientFlight
///     pb << .connectUpstream(address: "127.0.0.1", port: 9443)
///     pb.check()
///
/// (Swift's `>>` and `<<` do not associate, so each step is a statement of its own.)
///
/// Rules:
/// - Each `>>` feeds its event at once; the commands of an event must be exactly those written after it, in order
///   (`Expect.anyLogs` takes any run of log commands). They are compared when the next event is fed and at `check()`.
/// - The session's commands act on in-memory peers as a socket would: `sendToClient` feeds the client's real
///   `TLSEngine`, `connectUpstream` and `connectLane` make a fresh origin engine, closes end the peer's stream.
///   `From` inputs take the peers' answers (`.clientFlight`, `.origin(sends:)`, `.laneFlight(lane)`), so every TLS
///   leg is real. HTTP/2 over them is written and read with `H2Peer`.
/// - On the first difference the playbook stops feeding events and `check()` records one issue that prints both
///   sides, one line per event or command, with the first differing line marked `▶`.
/// - A playbook that was never checked, or differs when dropped, is an issue too.
final class Playbook {
    let env: ProxyEnvironment
    let session: ProxySession
    /// The session's clock (seconds since 1970); `advance` moves it.
    private(set) var now: Double
    /// The app's side, when the playbook drives TLS from a client.
    let client: TLSPeer?
    /// The origin of the latest upstream connection (each `connectUpstream` makes a new one).
    private(set) var origin: TLSPeer?
    /// Every origin connection made, in order.
    private(set) var origins: [TLSPeer] = []
    /// The origin of each extra upstream connection (`connectLane`), made by the same `origin` factory.
    private(set) var lanes: [UpstreamLane: TLSPeer] = [:]
    private let makeOrigin: (() throws -> TLSEngine)?

    private struct Segment {
        var event: String
        var actual: [ProxyCommand]
        /// What the peer decrypted from each send (nil for other commands and cleartext).
        var decrypted: [[UInt8]?]
        var expected: [Expect] = []

        func line(_ i: Int) -> String {
            WireText.command(actual[i]) + (decrypted[i].map { " ⇒ \(WireText.plaintext($0))" } ?? "")
        }
    }

    private var segments: [Segment] = []
    /// Segments before this index matched.
    private var verified = 0
    private var failure: String?
    private var reported = false
    private var unchecked = false
    /// While writing a playbook: feed every event without comparing, then print `transcript` to see what the
    /// session did. A playbook left in this mode fails its `check()`.
    var authoring = false
    private let location: SourceLocation
    /// Where a difference is reported (an issue; the harness's own tests capture it).
    var report: (String, SourceLocation) -> Void = { text, location in
        Issue.record(Comment(rawValue: text), sourceLocation: location)
    }

    /// A playbook over a new session of `env`. `client`: the app's TLS engine; `origin`: makes the origin's engine
    /// for each upstream connection the session opens.
    init(_ env: ProxyEnvironment, client: TLSEngine? = nil, origin: (() throws -> TLSEngine)? = nil,
         now: Double = 1_700_000_000, sourceLocation: SourceLocation = #_sourceLocation) {
        self.env = env
        self.now = now
        self.client = client.map { TLSPeer("client", engine: $0, startsInClear: true) }
        self.makeOrigin = origin
        self.location = sourceLocation
        let clock = ClockBox()
        clock.now = now
        self.clock = clock
        session = ProxySession(id: 1, environment: env, now: { clock.now })
    }

    private final class ClockBox { var now: Double = 0 }
    private let clock: ClockBox

    /// Moves the session's clock on.
    func advance(_ seconds: Double) {
        now += seconds
        clock.now = now
    }

    deinit {
        guard !reported else { return }
        if let failure {
            report(failure, location)
        } else if unchecked {
            report("The playbook was not checked after its last step: call check()", location)
        }
    }

    // MARK: - Steps

    @discardableResult
    static func >> (pb: Playbook, event: ProxyEvent) -> Playbook {
        pb.feed(event, label: nil)
        return pb
    }

    @discardableResult
    static func >> (pb: Playbook, input: From) -> Playbook {
        guard pb.advanceToNextEvent() else { return pb }
        do {
            let (event, label) = try input.resolve(pb)
            pb.feed(event, label: label)
        } catch {
            pb.failure = "The playbook's input \(input) failed: \(error)"
        }
        return pb
    }

    @discardableResult
    static func << (pb: Playbook, command: ProxyCommand) -> Playbook {
        pb << Expect.exactly(command)
    }

    @discardableResult
    static func << (pb: Playbook, expectation: Expect) -> Playbook {
        guard pb.failure == nil else { return pb }
        guard !pb.segments.isEmpty else {
            pb.failure = "The playbook expects \(expectation) before any event"
            return pb
        }
        pb.segments[pb.segments.count - 1].expected.append(expectation)
        pb.unchecked = true
        return pb
    }

    /// Compares everything so far; records an issue with the transcript when it differs. Returns whether it matched.
    @discardableResult
    func check(sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        unchecked = false
        if authoring {
            reported = true
            report("The playbook is in authoring mode: nothing was compared. What the session did:\n" + transcript,
                   sourceLocation)
            return false
        }
        _ = verify()
        guard let failure else { return true }
        if !reported {
            reported = true
            report(failure, sourceLocation)
        }
        return false
    }

    private func feed(_ event: ProxyEvent, label: String?) {
        guard advanceToNextEvent() else { return }
        let commands = session.handle(event)
        let line = (label.map { "\($0): " } ?? "") + WireText.event(event)
        let decrypted = commands.map(apply)
        segments.append(Segment(event: line, actual: commands, decrypted: decrypted))
        unchecked = true
    }

    /// Verifies the segments so far; false once the playbook has failed (no more events are fed).
    private func advanceToNextEvent() -> Bool {
        verify()
    }

    // MARK: - The wire

    /// Carries out `command` on the peers; returns the plaintext a TLS peer decrypted from a send.
    private func apply(_ command: ProxyCommand) -> [UInt8]? {
        switch command {
        case .sendToClient(let b):
            if let client, !client.closedBySession { return Self.nonEmpty(client.deliver(b)) }
        case .sendToUpstream(let b):
            if let origin, !origin.closedBySession { return Self.nonEmpty(origin.deliver(b)) }
        case .connectUpstream:
            guard let makeOrigin else { return nil }
            do {
                let peer = TLSPeer("origin \(origins.count + 1)", engine: try makeOrigin())
                origin = peer
                origins.append(peer)
            } catch {
                failure = "The playbook could not make an origin: \(error)"
            }
        case .connectLane(let lane, _, _):
            guard let makeOrigin else { return nil }
            do {
                lanes[lane] = TLSPeer("origin of \(lane)", engine: try makeOrigin())
            } catch {
                failure = "The playbook could not make an origin for \(lane): \(error)"
            }
        case .sendToLane(let lane, let b):
            if let peer = lanes[lane], !peer.closedBySession { return Self.nonEmpty(peer.deliver(b)) }
        case .closeLane(let lane):
            lanes[lane]?.closedBySession = true
        case .closeUpstream:
            origin?.closedBySession = true
        case .shutdownUpstreamWrite:
            origin?.deliverEnd()
        case .closeClient, .resetClient:
            client?.closedBySession = true
        case .shutdownClientWrite:
            client?.deliverEnd()
        default:
            break
        }
        return nil
    }

    private static func nonEmpty(_ plaintext: [UInt8]) -> [UInt8]? { plaintext.isEmpty ? nil : plaintext }

    // MARK: - Matching

    @discardableResult
    private func verify() -> Bool {
        if authoring { return true }
        guard failure == nil else { return false }
        while verified < segments.count {
            let s = segments[verified]
            if let (e, a) = Self.firstDifference(s.expected, s.actual, s.decrypted) {
                failure = transcript(differingAt: verified, expected: e, actual: a)
                return false
            }
            verified += 1
        }
        return true
    }

    /// Nil when `actual` is exactly what `expected` describes; else the indexes of the first difference (an index
    /// at the end of a list: that side has nothing more).
    static func firstDifference(_ expected: [Expect], _ commands: [ProxyCommand], _ decrypted: [[UInt8]?])
        -> (Int, Int)?
    {
        let actual = zip(commands, decrypted).map { Sent(command: $0, plaintext: $1) }
        var (e, a) = (0, 0)
        while e < expected.count {
            let x = expected[e]
            if case .anyLogs = x.kind {
                // Lazily: the next expectation gets the first command it matches.
                while a < actual.count, x.matches(actual[a]),
                    !(e + 1 < expected.count && expected[e + 1].matches(actual[a])) {
                    a += 1
                }
                e += 1
                continue
            }
            guard a < actual.count, x.matches(actual[a]) else { return (e, a) }
            e += 1
            a += 1
        }
        return a == actual.count ? nil : (e, a)
    }

    /// What the session did so far, one line per event or command (the actual side of a diff).
    var transcript: String {
        segments.flatMap { s in ["    >> \(s.event)"] + s.actual.indices.map { "    << \(s.line($0))" } }
            .joined(separator: "\n")
    }

    /// Both sides up to the differing event, one line per event or command; the first differing line marked.
    private func transcript(differingAt index: Int, expected e: Int, actual a: Int) -> String {
        var want: [String] = []
        var got: [String] = []
        for (n, s) in segments[...index].enumerated() {
            want.append("    >> \(s.event)")
            got.append("    >> \(s.event)")
            for (i, x) in s.expected.enumerated() {
                want.append("\(n == index && i == e ? "  ▶ " : "    ")<< \(x)")
            }
            if n == index, e == s.expected.count { want.append("  ▶ (nothing more)") }
            for i in s.actual.indices {
                got.append("\(n == index && i == a ? "  ▶ " : "    ")<< \(s.line(i))")
            }
            if n == index, a == s.actual.count { got.append("  ▶ (nothing more)") }
        }
        return "The session's commands differ from the playbook at event \(index + 1) (first difference ▶)\n"
            + "expected:\n" + want.joined(separator: "\n") + "\nactual:\n" + got.joined(separator: "\n")
    }
}

/// Inputs a playbook takes from its in-memory peers when the step runs (what they send depends on what the
/// session sent them before).
enum From: CustomStringConvertible {
    /// The client's pending TLS flight (its ClientHello first, then what its handshake answers).
    case clientFlight
    /// The current origin's pending TLS flight.
    case originFlight
    /// The client encrypts and sends this plaintext.
    case client(sends: String)
    /// The origin encrypts and sends this plaintext.
    case origin(sends: String)
    /// The client sends close_notify.
    case clientCloseNotify
    /// The client encrypts and sends these bytes (HTTP/2 frames from an `H2Peer`).
    case clientSends([UInt8])
    /// The current origin encrypts and sends these bytes (HTTP/2 frames from an `H2Peer`).
    case originSends([UInt8])
    /// The pending TLS flight of the origin of `lane`.
    case laneFlight(UpstreamLane)
    /// The origin of `lane` encrypts and sends this plaintext.
    case lane(UpstreamLane, sends: String)

    var description: String {
        switch self {
        case .clientFlight: "client flight"
        case .originFlight: "origin flight"
        case .client(let text): "client sends \(WireText.quoted(Array(text.utf8)))"
        case .origin(let text): "origin sends \(WireText.quoted(Array(text.utf8)))"
        case .clientCloseNotify: "client close_notify"
        case .clientSends(let b): "client sends \(WireText.plaintext(b))"
        case .originSends(let b): "origin sends \(WireText.plaintext(b))"
        case .laneFlight(let lane): "\(lane) origin flight"
        case .lane(let lane, let text): "\(lane) origin sends \(WireText.quoted(Array(text.utf8)))"
        }
    }

    struct NoPeer: Error, CustomStringConvertible {
        let name: String
        var description: String { "the playbook has no \(name)" }
    }

    func resolve(_ pb: Playbook) throws -> (ProxyEvent, String) {
        func need(_ peer: TLSPeer?, _ name: String) throws -> TLSPeer {
            guard let peer else { throw NoPeer(name: name) }
            return peer
        }
        switch self {
        case .clientFlight: return (.clientBytes(try need(pb.client, "client").flight()), description)
        case .originFlight: return (.upstreamBytes(try need(pb.origin, "origin").flight()), description)
        case .client(let text):
            return (.clientBytes(try need(pb.client, "client").sends(Array(text.utf8))), description)
        case .origin(let text):
            return (.upstreamBytes(try need(pb.origin, "origin").sends(Array(text.utf8))), description)
        case .clientCloseNotify: return (.clientBytes(try need(pb.client, "client").closeNotify()), description)
        case .clientSends(let b): return (.clientBytes(try need(pb.client, "client").sends(b)), description)
        case .originSends(let b): return (.upstreamBytes(try need(pb.origin, "origin").sends(b)), description)
        case .laneFlight(let lane):
            return (.laneBytes(lane, try need(pb.lanes[lane], "origin of \(lane)").flight()), description)
        case .lane(let lane, let text):
            return (.laneBytes(lane, try need(pb.lanes[lane], "origin of \(lane)").sends(Array(text.utf8))),
                    description)
        }
    }
}
