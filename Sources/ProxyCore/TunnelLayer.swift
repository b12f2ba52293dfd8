import ATSPolicy
import ProxyTrace
import TLSCore

// Theory of operation: raw tunnels of hosts passed through (`--passthrough`), of hosts the app pins
// (NSPinnedDomains: interception would break the pin) and of clients that do not speak TLS after CONNECT. The proxy
// relays their bytes untouched, so the policy cannot judge them the way it judges an intercepted connection. What it
// can still read are the two hellos, sent in clear in every TLS version: what the client offered and what the server
// chose. The server's choice is judged against the host's ATS requirements where it says something about the app's
// own connection:
// - a version below what ATS accepts, chosen although the client offered a newer one, means the server has nothing
//   newer: the app fails too (a violation);
// - a version and suite that iOS offers and ATS accepts: allowed (the certificate is not judged: TLS 1.3 encrypts
//   it);
// - otherwise the client offered what iOS does not (an older version only, a suite outside iOS's list), and the
//   server may well choose differently for the app: not judged, and the record says why.
// Nothing is blocked: the device sees the server's real handshake and makes its own ATS check.
//
// States: connecting (the client's bytes are held, up to `pendingLimit`, while the upstream connects; a
// CONNECT to a passthrough or pinned host gets its 200 only then, so an unreachable one is answered 502), then open
// (the adapter relays both ways and hands the session the first bytes while `watchesTunnel`), then done when the
// adapter reports the tunnel closed, with the byte counts for its record.

/// A tunnel the proxy relays without looking inside: one console line (and JSON exchange) when it ends, so
/// that hosts the policy never sees still leave a record.
struct Tunnel {
    var host: String
    var port: Int
    var note: String
    var started: Double
    /// Client bytes the session itself sent upstream before the relay took over.
    var clientBytesBefore = 0
    /// The `200 Connection established` still to send once the upstream is connected (nil once sent).
    var established: [UInt8]?
    /// Each side's first bytes, until its hello has been read; nil once read, given up on, or not watched.
    var clientFirstFlight: [UInt8]?
    var serverFirstFlight: [UInt8]?
    var clientHello: ClientHello?
    var serverAnswer: ServerAnswer?
    var outcome: ExchangeSummary.ATSOutcome = .notEvaluated
    var errors: [ExchangeError] = []

    /// Whether the client spoke TLS (or was expected to): the record then names an https:// URL, else host:port.
    let clientSpeaksTLS: Bool

    /// `clientSpeaksTLS`: also whether the hellos are to be read (only a TLS client's tunnel has them).
    init(host: String, port: Int, note: String, started: Double, clientSpeaksTLS: Bool = true) {
        self.host = host
        self.port = port
        self.note = note
        self.started = started
        self.clientSpeaksTLS = clientSpeaksTLS
        clientFirstFlight = clientSpeaksTLS ? [] : nil
        serverFirstFlight = clientSpeaksTLS ? [] : nil
    }

    var isWatching: Bool { clientFirstFlight != nil || serverFirstFlight != nil }
}

/// A raw tunnel: its record, and the client bytes held while its upstream connects.
final class TunnelLayer {
    var record: Tunnel
    /// Client bytes held while the upstream connects; nil once it is connected and the adapter relays raw.
    var pending: [UInt8]?
    var isOpen: Bool { pending == nil }
    /// The side connection checking a pinned host's pins, while it runs (TunnelLayer+PinCheck).
    var pinProbe: PinProbe?
    /// The relay's byte counts once the tunnel ended while the pin check still ran: it is logged when that ends.
    var closedCounts: (fromClient: Int, toClient: Int)?

    init(record: Tunnel, pending: [UInt8]) {
        self.record = record
        self.pending = pending
    }
}

extension TunnelLayer {
    /// Client bytes held for a tunnel whose upstream is still connecting, past which the client is no longer read.
    static let pendingLimit = 64 * 1024

    /// Client bytes before the adapter relays raw: held while the upstream connects.
    func clientBytes(_ ctx: SessionContext, _ bytes: [UInt8]) {
        guard pending != nil else { return }
        pending?.append(contentsOf: bytes)
        let count = pending?.count ?? 0
        // Held until the upstream answers (up to the connect timeout): past the limit the client waits.
        if count >= Self.pendingLimit, count - bytes.count < Self.pendingLimit {
            ctx.commands.append(.pauseReading(.client))
        }
    }

    func upstreamConnected(_ ctx: SessionContext) {
        guard let held = pending else { return }
        pending = nil
        if let established = record.established {
            ctx.commands.append(.sendToClient(established))
            record.established = nil
        }
        if !held.isEmpty {
            ctx.commands.append(.sendToUpstream(held))
            // The relay counts and shows the session only what it moves; these bytes (the start of a
            // ClientHello, say) went before it.
            record.clientBytesBefore = held.count
            bytesSeen(ctx, fromClient: true, held)
        }
        if held.count >= Self.pendingLimit { ctx.commands.append(.resumeReading(.client)) }
        ctx.commands.append(.startTunnel)
    }

    /// One console line (and JSON exchange) for a tunnel that ended.
    func log(_ ctx: SessionContext, fromClient: Int, toClient: Int, status: Int? = nil) {
        let tunnel = record
        let url = tunnel.clientSpeaksTLS
            ? InterceptLayer.httpsURL(host: tunnel.host, port: tunnel.port)
            : InterceptLayer.authority(host: tunnel.host, port: tunnel.port)
        ctx.recordExchange(ExchangeSummary(
            method: "CONNECT", url: url, status: status,
            kind: .tunnel, outcome: tunnel.outcome, errors: tunnel.errors,
            requestBytes: tunnel.clientBytesBefore + fromClient, responseBytes: toClient,
            durationMilliseconds: (ctx.now() - tunnel.started) * 1000, note: tunnel.note))
    }

    /// The tunnel's server could not be reached: answered 502 when the client has not had its 200 yet (a
    /// non-TLS client had it before the proxy knew), and recorded as a failure, not an ATS verdict.
    func upstreamConnectFailed(_ ctx: SessionContext, _ error: String, _ failure: ConnectFailure) {
        guard !isOpen else {
            ctx.closeAll()
            return
        }
        let mapped = ctx.mappingNote(host: record.host, port: record.port)
        ctx.notice("\(record.host):\(record.port)\(mapped): cannot connect upstream for the tunnel: \(error)")
        record.outcome = .failed
        record.errors = [ExchangeError(urlError: failure.urlError)]
        record.note += "; could not connect\(mapped): \(error)"
        let answered = record.established != nil
        record.established = nil
        if answered {
            ctx.answerAndClose(
                status: 502,
                body: "ATSProxy: cannot connect to \(record.host):\(record.port)\(mapped): \(error)\n")
        } else {
            ctx.closeAll()
        }
        log(ctx, fromClient: 0, toClient: 0, status: answered ? 502 : nil)
    }

    /// The first bytes either side sent through the raw relay, while their hellos are read.
    func bytesSeen(_ ctx: SessionContext, fromClient: Bool, _ bytes: [UInt8]) {
        guard ctx.env.mode != .off else { return }
        var t = record
        if fromClient {
            guard var flight = t.clientFirstFlight else { return }
            // The only reference left is `flight`, so the bytes are appended in place rather than copying the flight
            // so far on every read. Both paths below store the flight again, or nil.
            record.clientFirstFlight = nil
            t.clientFirstFlight = nil
            flight += bytes
            do {
                t.clientHello = try ClientHelloParser.parse(flight)
                t.clientFirstFlight = t.clientHello == nil ? flight : nil
            } catch {
                t.clientFirstFlight = nil  // the server's choice is then judged without the offer
            }
        } else {
            guard var flight = t.serverFirstFlight else { return }
            record.serverFirstFlight = nil  // as for the client's flight
            t.serverFirstFlight = nil
            flight += bytes
            do {
                t.serverAnswer = try ServerHelloParser.parse(flight)
                t.serverFirstFlight = t.serverAnswer == nil ? flight : nil
            } catch {
                t.serverFirstFlight = nil
                t.clientFirstFlight = nil
                t.note += "; not judged: the server's first bytes are not a TLS handshake (\(error.detail))"
            }
        }
        if let answer = t.serverAnswer {
            // A server answers only a whole ClientHello, and the proxy reads the client's bytes before it forwards
            // them: a hello not read by now never will be.
            t.serverAnswer = nil
            t.clientFirstFlight = nil
            judge(ctx, &t, answer)
        }
        record = t
    }

    private func judge(_ ctx: SessionContext, _ t: inout Tunnel, _ answer: ServerAnswer) {
        guard case .hello(let hello) = answer else {
            if case .alert(let alert) = answer {
                t.note += t.clientHello == nil
                    ? "; not judged: the server sent the alert \(alert) before any ClientHello was read"
                    : "; not judged: the server refused the client's hello with the alert \(alert)"
            }
            return
        }
        let wire = hello.selectedVersion ?? hello.legacyVersion
        let version = hello.version.map(\.plistName) ?? "version 0x\(String(wire, radix: 16))"
        let suite = CipherSuite.lookup(code: hello.cipherSuite)?.ianaName
            ?? "suite 0x\(String(hello.cipherSuite, radix: 16))"
        let chose = "server chose \(version), \(suite)"
        let target = ConnectionTarget(scheme: "https", host: t.host, port: t.port)
        guard case .proceed(let req) = ctx.env.requirements(for: target) else {
            t.note += "; \(chose)"
            return
        }
        let versionIssues = ctx.env.policy.evaluateNegotiation(
            version: hello.version, cipherSuiteCode: nil, against: req,
            versionSubject: "its newest version is \(version) (the client offered newer)", at: ctx.clockDate)
        let suiteIssues = ctx.env.policy.evaluateNegotiation(
            version: nil, cipherSuiteCode: hello.cipherSuite, against: req, at: ctx.clockDate)
        let url = InterceptLayer.httpsURL(host: t.host, port: t.port)
        if !versionIssues.isEmpty {
            guard let offer = t.clientHello, let v = hello.version, offer.offeredVersions.contains(where: { $0 > v })
            else {
                t.note += "; \(chose), not judged: the client offered nothing newer, so what the server would "
                    + "choose for iOS is unknown"
                return
            }
            t.outcome = .violation
            t.errors += versionIssues.map(ExchangeError.init)
            let why = versionIssues.map(\.explanation).joined(separator: "; ")
            t.note += "; \(chose): \(why)"
            let codes = versionIssues.map { ExchangeError($0).shortCode }.joined(separator: ", ")
            ctx.notice("\(t.host):\(t.port): the tunnelled server offers nothing newer than \(version), which the app's "
                + "ATS policy refuses (\(codes)); the device's own check fails the app's request: \(why)")
            ctx.traceDecision(
                url: url, decision: req.decidedBy, violations: versionIssues,
                action: "tunnelled, not blocked: the device judges the server itself")
        } else if !suiteIssues.isEmpty {
            t.note += "; \(chose), not judged: iOS does not offer that suite, so the server may choose another for "
                + "the app"
        } else {
            // A pin mismatch found on a side connection stays the verdict (TunnelLayer+PinCheck).
            if t.outcome == .notEvaluated { t.outcome = .allowed }
            t.note += "; \(chose)\(ctx.env.policy.pinSet(for: t.host) == nil ? ", certificate not judged" : "")"
            ctx.traceDecision(url: url, decision: req.decidedBy, violations: [], action: "tunnelled: ServerHello allowed")
        }
    }

    /// The adapter's raw relay ended: the tunnel is logged, or once its pin check ends (TunnelLayer+PinCheck).
    func relayClosed(_ ctx: SessionContext, fromClient: Int, toClient: Int) {
        if pinProbe != nil {
            closedCounts = (fromClient, toClient)
            return
        }
        ctx.phase = .done
        log(ctx, fromClient: fromClient, toClient: toClient)
    }
}
