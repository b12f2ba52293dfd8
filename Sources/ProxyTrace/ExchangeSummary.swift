import ATSPolicy

/// One finished exchange (request and response, or a refused load, a blocked handshake, a tunnel): the record every
/// relay emits and every sink consumes. The fields up to `note` are what the console line and the JSON `exchange`
/// event show, for every exchange; `connection`, `action` and `detail` are filled for sinks that keep or show
/// traffic (see `ExchangeDetail`), and are not part of the JSON event.
public struct ExchangeSummary: Sendable, Equatable, Codable {
    public enum ATSOutcome: String, Sendable, Codable {
        /// The policy allows the connection.
        case allowed
        /// The policy forbids it and the proxy blocked it (`--ats enforce`).
        case blocked
        /// The policy forbids it; the proxy let it through and annotated it (`--ats annotate`).
        case violation
        /// Not evaluated: `--ats off`, or a tunnel the proxy did not intercept.
        case notEvaluated
        /// The upstream could not be reached (no such host, refused, timed out): a network failure, not a verdict.
        case failed
    }

    public var method: String
    public var url: String
    /// nil when no response was received.
    public var status: Int?
    /// The protocol spoken (`HTTP/1.1`, `HTTP/2.0`, `UPGRADED` after a 101); for a tunnel or a refused handshake,
    /// which spoke none, the kind's label (`TUNNEL`, `TLS`) that the console line, the JSON event and a capture
    /// show in its place. Tell those apart by `kind`, never by this text.
    public var httpVersion: String
    public var outcome: ATSOutcome
    /// A request, a tunnel or a refused handshake. Next to `outcome`: it takes a byte of that field's padding, so
    /// the record copied along the relaying path does not grow.
    public var kind: ExchangeKind
    /// The errors of the violations, empty when allowed: the first is what the app's task would fail with.
    public var errors: [ExchangeError]
    public var requestBytes: Int
    public var responseBytes: Int
    public var durationMilliseconds: Double
    /// Why the exchange ended before its response was complete (a reset stream, a lost connection); nil when it
    /// completed. A status alone would make a cut-off transfer look like a success.
    public var interruption: String?
    /// Why the proxy did what it did, when the line alone would not say (a tunnel: why it was not intercepted).
    public var note: String?
    /// `--ats mirror`: what the device was shown on this exchange's connection and what it did (nil otherwise).
    /// Kept in the boxed extras, as the details are: a field of its own cost every record's copies on the relaying
    /// path about 150 instructions per request in every mode; unlike the details it is on the console line and in
    /// the JSON event.
    public var mirror: MirrorRecord? {
        get { extras?.mirror }
        set { if newValue != nil || extras?.mirror != nil { updateExtras { $0.mirror = newValue } } }
    }
    /// The rules that acted on the exchange (issue 33), in the order they acted; empty when none did. In the boxed
    /// extras, as `mirror` is: no cost to the records of a proxy without rules.
    public var rules: [AppliedRule] {
        get { extras?.rules ?? [] }
        set { if !newValue.isEmpty || extras?.rules.isEmpty == false { updateExtras { $0.rules = newValue } } }
    }
    /// The captured exchange this one replays (issue 34): the id the replay's marker field named
    /// (`X-ATSProxy-Replay-Of`, removed before the request goes upstream); nil for the app's own traffic. In the
    /// boxed extras, as `rules` is.
    public var replayOf: Int64? {
        get { extras?.replayOf }
        set { if newValue != nil || extras?.replayOf != nil { updateExtras { $0.replayOf = newValue } } }
    }
    /// The connection and its ATS verdict (set by the session for every exchange when details are recorded).
    public var connection: ConnectionRecord? {
        get { extras?.connection }
        set { updateExtras { $0.connection = newValue } }
    }
    /// What the proxy did (set with `connection`).
    public var action: ExchangeAction? {
        get { extras?.action }
        set { updateExtras { $0.action = newValue } }
    }
    /// Heads on each leg, timings and body bytes (nil unless a sink asked for details).
    public var detail: ExchangeDetail? {
        get { extras?.detail }
        set { updateExtras { $0.detail = newValue } }
    }

    /// The details, behind one reference: every exchange is copied through commands and log entries on the
    /// relaying path, and these fields are nil there unless a sink records; inline they made every copy of the
    /// record several times larger (5% more instructions per keep-alive request).
    private var extras: Extras?

    // Immutable: a change makes a new box (`updateExtras`). `let` fields also let `withRecord` lend them to its body
    // without copying each one out (a `var` field of a class is copied, every string and array of it retained).
    private final class Extras: Sendable {
        let connection: ConnectionRecord?
        let action: ExchangeAction?
        let detail: ExchangeDetail?
        let mirror: MirrorRecord?
        let rules: [AppliedRule]
        let replayOf: Int64?

        init(
            connection: ConnectionRecord?, action: ExchangeAction?, detail: ExchangeDetail?, mirror: MirrorRecord?,
            rules: [AppliedRule], replayOf: Int64?
        ) {
            self.replayOf = replayOf
            self.connection = connection
            self.action = action
            self.detail = detail
            self.mirror = mirror
            self.rules = rules
        }
    }

    /// Sets the connection, the action and the detail at once: one copy of the boxed extras instead of one per
    /// field (the session records all three for every exchange a capture keeps).
    public mutating func setRecord(connection: ConnectionRecord, action: ExchangeAction, detail: ExchangeDetail) {
        extras = Extras(
            connection: connection, action: action, detail: detail, mirror: extras?.mirror, rules: extras?.rules ?? [],
            replayOf: extras?.replayOf)
    }

    /// Calls `body` with the connection, the action and the detail, lent rather than copied out one by one (the
    /// getters each copy a whole struct): for sinks that read every field of every exchange.
    public func withRecord<Result>(
        _ body: (_ connection: ConnectionRecord?, _ action: ExchangeAction?, _ detail: ExchangeDetail?) -> Result
    ) -> Result {
        guard let extras else { return body(nil, nil, nil) }
        return body(extras.connection, extras.action, extras.detail)
    }

    private mutating func updateExtras(_ change: (inout Fields) -> Void) {
        var fields = Fields(
            connection: extras?.connection, action: extras?.action, detail: extras?.detail, mirror: extras?.mirror,
            rules: extras?.rules ?? [], replayOf: extras?.replayOf)
        change(&fields)
        extras = Extras(
            connection: fields.connection, action: fields.action, detail: fields.detail, mirror: fields.mirror,
            rules: fields.rules, replayOf: fields.replayOf)
    }

    private struct Fields {
        var connection: ConnectionRecord?
        var action: ExchangeAction?
        var detail: ExchangeDetail?
        var mirror: MirrorRecord?
        var rules: [AppliedRule]
        var replayOf: Int64?
    }

    private enum CodingKeys: String, CodingKey {
        case method, url, status, httpVersion, outcome, errors, requestBytes, responseBytes, durationMilliseconds
        case interruption, note, mirror, rules, replayOf
    }

    // Written out because `mirror` lives in the extras; a field that does not apply is left out, never null. The
    // kind is not a field of the event: its label stands in `httpVersion`, and is read back from there.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            method: try c.decode(String.self, forKey: .method), url: try c.decode(String.self, forKey: .url),
            status: try c.decodeIfPresent(Int.self, forKey: .status),
            httpVersion: try c.decode(String.self, forKey: .httpVersion),
            outcome: try c.decode(ATSOutcome.self, forKey: .outcome),
            errors: try c.decode([ExchangeError].self, forKey: .errors),
            requestBytes: try c.decode(Int.self, forKey: .requestBytes),
            responseBytes: try c.decode(Int.self, forKey: .responseBytes),
            durationMilliseconds: try c.decode(Double.self, forKey: .durationMilliseconds),
            interruption: try c.decodeIfPresent(String.self, forKey: .interruption),
            note: try c.decodeIfPresent(String.self, forKey: .note))
        mirror = try c.decodeIfPresent(MirrorRecord.self, forKey: .mirror)
        rules = try c.decodeIfPresent([AppliedRule].self, forKey: .rules) ?? []
        replayOf = try c.decodeIfPresent(Int64.self, forKey: .replayOf)
        kind = .recorded(method: method, version: httpVersion)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(method, forKey: .method)
        try c.encode(url, forKey: .url)
        try c.encodeIfPresent(status, forKey: .status)
        try c.encode(httpVersion, forKey: .httpVersion)
        try c.encode(outcome, forKey: .outcome)
        try c.encode(errors, forKey: .errors)
        try c.encode(requestBytes, forKey: .requestBytes)
        try c.encode(responseBytes, forKey: .responseBytes)
        try c.encode(durationMilliseconds, forKey: .durationMilliseconds)
        try c.encodeIfPresent(interruption, forKey: .interruption)
        try c.encodeIfPresent(note, forKey: .note)
        try c.encodeIfPresent(mirror, forKey: .mirror)
        let rules = rules
        if !rules.isEmpty { try c.encode(rules, forKey: .rules) }
        try c.encodeIfPresent(replayOf, forKey: .replayOf)
    }

    /// Equal in what the console line and the JSON event show; the details are not compared.
    public static func == (a: ExchangeSummary, b: ExchangeSummary) -> Bool {
        a.method == b.method && a.url == b.url && a.status == b.status && a.httpVersion == b.httpVersion
            && a.outcome == b.outcome && a.kind == b.kind && a.errors == b.errors && a.requestBytes == b.requestBytes
            && a.responseBytes == b.responseBytes && a.durationMilliseconds == b.durationMilliseconds
            && a.interruption == b.interruption && a.note == b.note && a.action == b.action && a.mirror == b.mirror
            && a.rules == b.rules && a.replayOf == b.replayOf
    }

    public init(
        method: String, url: String, status: Int?, httpVersion: String, outcome: ATSOutcome, errors: [ExchangeError],
        requestBytes: Int, responseBytes: Int, durationMilliseconds: Double, interruption: String? = nil,
        note: String? = nil
    ) {
        self.method = method
        self.url = url
        self.status = status
        self.httpVersion = httpVersion
        self.outcome = outcome
        kind = .http
        self.errors = errors
        self.requestBytes = requestBytes
        self.responseBytes = responseBytes
        self.durationMilliseconds = durationMilliseconds
        self.interruption = interruption
        self.note = note
    }

    /// A record that is no request through the proxy (a tunnel, a refused handshake): its version text is the
    /// kind's label. `kind` is not `.http`.
    public init(
        method: String, url: String, status: Int?, kind: ExchangeKind, outcome: ATSOutcome, errors: [ExchangeError],
        requestBytes: Int, responseBytes: Int, durationMilliseconds: Double, interruption: String? = nil,
        note: String? = nil
    ) {
        self.init(
            method: method, url: url, status: status, httpVersion: kind.versionLabel ?? "", outcome: outcome,
            errors: errors, requestBytes: requestBytes, responseBytes: responseBytes,
            durationMilliseconds: durationMilliseconds, interruption: interruption, note: note)
        self.kind = kind
    }

    /// The console line: `GET https://host/path 200 HTTP/1.1 ATS ok 1.0 KiB 12 ms`, with ANSI colour only when
    /// `colour` is set (the CLI sets it when stdout is a terminal). Built by appending, with the numbers in integer
    /// arithmetic: it runs once per exchange on the loop thread, and interpolating `Double`s cost about 3% of a
    /// keep-alive request's CPU.
    public func consoleLine(colour: Bool) -> String {
        var ats: String
        var tint: String
        switch outcome {
        case .allowed: (ats, tint) = ("ATS ok", "\u{1B}[32m")
        case .blocked: (ats, tint) = ("ATS BLOCKED " + shortCodes, "\u{1B}[31m")
        case .violation: (ats, tint) = ("ATS VIOLATION " + shortCodes, "\u{1B}[33m")
        case .notEvaluated: (ats, tint) = ("ATS n/a", "\u{1B}[2m")
        case .failed: (ats, tint) = ("FAILED " + shortCodes, "\u{1B}[31m")
        }
        if let mirror {
            // The simulated verdict (with --plist), then what the device was shown and did.
            ats = outcome == .notEvaluated ? mirror.consoleText : ats + " " + mirror.consoleText
            tint = mirror.disagreement != nil ? "\u{1B}[33m" : mirror.deviceAccepted ? "\u{1B}[32m" : "\u{1B}[31m"
        }
        var line = ""
        line.reserveCapacity(method.utf8.count + url.utf8.count + ats.utf8.count + 48)
        line += method
        line += " "
        line += url
        line += " "
        line += status.map { String($0) } ?? "---"
        line += " "
        line += httpVersion
        line += " "
        if colour {
            line += tint
            line += ats
            line += "\u{1B}[0m"
        } else {
            line += ats
        }
        line += " "
        line += Self.formatBytes(responseBytes)
        line += " "
        // Tenths below 10 ms, whole milliseconds above (truncated and rounded respectively, as always).
        if durationMilliseconds < 10 {
            line += Self.tenths(Int(durationMilliseconds * 10))
        } else {
            line += String(Int(durationMilliseconds.rounded()))
        }
        line += " ms"
        if let interruption {
            line += " INCOMPLETE: "
            line += interruption
        }
        if let note {
            line += " ("
            line += note
            line += ")"
        }
        if let mirror { line += mirror.consoleTail }
        if extras?.rules.isEmpty == false {
            for rule in rules {
                line += " RULE "
                line += rule.summary
            }
        }
        if let replayOf = extras?.replayOf {
            line += " (replay of #"
            line += String(replayOf)
            line += ")"
        }
        return line
    }

    /// `-1200/-9836,-1202/-9812`: each error's short code.
    private var shortCodes: String { errors.map(\.shortCode).joined(separator: ",") }

    static func formatBytes(_ n: Int) -> String {
        if n < 1024 { return String(n) + " B" }
        if n < 1024 * 1024 { return tenths(n * 10 / 1024) + " KiB" }
        return tenths(n * 10 / (1024 * 1024)) + " MiB"
    }

    /// `t` tenths as a decimal with one digit after the point: 15 → "1.5", 100 → "10.0".
    private static func tenths(_ t: Int) -> String {
        String(t / 10) + "." + String(t % 10)
    }
}

/// The error the app would get from one violation: the NSURLErrorDomain code and, for TLS failures, the
/// `_kCFStreamErrorCodeKey` code (reference §4), each with its name.
public struct ExchangeError: Sendable, Equatable, Codable {
    public var urlError: URLErrorCode
    /// nil for errors that carry no SSL code (-1022, unreachable servers).
    public var sslError: SSLErrorCode?

    public init(urlError: URLErrorCode, sslError: SSLErrorCode? = nil) {
        self.urlError = urlError
        self.sslError = sslError
    }

    /// The codes of `violation`.
    public init(_ violation: ATSViolation) {
        self.init(urlError: violation.urlError, sslError: violation.sslError)
    }

    /// The console's token: `-1200/-9836`, or `-1022`.
    public var shortCode: String {
        sslError.map { String(urlError.code) + "/" + String($0.code) } ?? String(urlError.code)
    }
}

extension ExchangeSummary {
    /// The request field a replay carries to the proxy, naming the captured exchange it resends; the proxy takes it
    /// off before the request goes on and records it as `replayOf`.
    public static let replayMarkerField = "X-ATSProxy-Replay-Of"
}
