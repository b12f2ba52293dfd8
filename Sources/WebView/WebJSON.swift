import ATSPolicy
import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace

// The API's JSON shapes (docs/web.md documents each field). Encoded with sorted keys; optional fields that are nil
// are left out.

/// One row of the traffic list: what the console line shows, with the exchange's id.
struct ExchangeRowJSON: Encodable {
    var id: Int64
    var run: Int64
    /// Unix seconds when the request started.
    var time: Double
    var method: String
    var url: String
    var host: String
    var path: String
    var status: Int?
    /// `HTTP/1.1`, `HTTP/2.0`, `TLS` (a refused handshake), `TUNNEL`, `UPGRADED`.
    var `protocol`: String
    /// `http`, `tunnel`, `refusedHandshake` (`ExchangeKind`): what the page tells rows apart by.
    var kind: String
    /// `ok`, `blocked`, `violation`, `notJudged`, `failed`.
    var verdict: String
    var action: String?
    /// `-1200/-9836`: the app's NSURLError code and the SSL code, one per violation.
    var errors: [String]
    var requestBytes: Int
    var responseBytes: Int
    var durationMs: Double
    var interruption: String?
    var note: String?
    /// The rules that acted on the exchange (`id`, `action`, `point`, `note`), in order; absent when none did.
    var rules: [AppliedRule]?
    /// The exchange this one replays (issue 34); absent for the app's own traffic.
    var replayOf: Int64?

    init(_ exchange: CapturedExchange) {
        let e = exchange.record
        id = exchange.id
        run = exchange.runID
        time = e.detail?.timings.started ?? 0
        method = e.method
        url = e.url
        (host, path) = Self.hostAndPath(e.url)
        status = e.status
        `protocol` = e.httpVersion
        kind = e.kind.rawValue
        verdict = Self.verdict(e.outcome)
        action = e.action?.rawValue
        errors = e.errors.map(\.shortCode)
        requestBytes = e.requestBytes
        responseBytes = e.responseBytes
        durationMs = e.durationMilliseconds
        interruption = e.interruption
        note = e.note
        let applied = e.rules
        rules = applied.isEmpty ? nil : applied
        replayOf = e.replayOf
    }

    static func verdict(_ outcome: ExchangeSummary.ATSOutcome) -> String {
        switch outcome {
        case .allowed: "ok"
        case .blocked: "blocked"
        case .violation: "violation"
        case .notEvaluated: "notJudged"
        case .failed: "failed"
        }
    }

    /// `https://A.example:8443/x?y` → (`a.example:8443`, `/x?y`); a CONNECT's authority → (it, ``).
    static func hostAndPath(_ url: String) -> (String, String) {
        var rest = Substring(url)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        let end = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        var authority = rest[..<end]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        return (authority.lowercased(), String(rest[end...]))
    }
}

/// A page of the list.
struct ExchangeListJSON: Encodable {
    /// Newest first; with `after`, oldest first.
    var exchanges: [ExchangeRowJSON]
    /// More exchanges match beyond this page in the same direction.
    var more: Bool
}

/// A head on one leg: its start line and its fields in wire order.
struct HeadJSON: Encodable {
    var line: String
    var headers: [[String]]

    init(_ head: HTTPRequestHead) {
        line = head.method + " " + head.target + " " + head.version.description
        headers = head.headers.fields.map { [$0.name, FieldBytes.display($0.value)] }
    }

    init(_ head: HTTPResponseHead) {
        line = head.version.description + " " + String(head.status) + (head.reason.isEmpty ? "" : " " + head.reason)
        headers = head.headers.fields.map { [$0.name, FieldBytes.display($0.value)] }
    }
}

struct BodyInfoJSON: Encodable {
    /// Every byte that passed.
    var size: Int
    /// Bytes kept in the capture (`/api/exchanges/ID/body/…` serves them).
    var kept: Int
    var truncated: Bool
    var contentType: String?
    var contentEncoding: String?
}

struct ViolationJSON: Encodable {
    var kind: String
    var explanation: String
    var urlError: Int
    var urlErrorName: String
    var sslError: Int?
    var sslErrorName: String?
    /// The NSError the app's task completes with, as Foundation prints it.
    var appError: String
    /// One line: which key to set where, or why no exception can help.
    var fix: String
    /// The fix as a plist fragment for the inside of `NSAppTransportSecurity`; nil when no exception can help.
    var fixPlist: String?
    var certificateIndex: Int?
    var notes: [String]
}

struct DecisionJSON: Encodable {
    /// `NSAppTransportSecurity › NSExceptionDomains › example.com`; empty for ATS defaults.
    var decidedBy: String
    var reason: String
    var notes: [String]
}

struct ConnectionJSON: Encodable {
    var id: UInt64
    var clientAddress: String?
    var clientTLS: TLSLegFacts?
    var upstreamTLS: TLSLegFacts?
    /// The upstream handshake as the policy judged it: version, suite, chain (key sizes, signature hashes,
    /// validity, SANs), trust.
    var upstreamHandshake: HandshakeFacts?
}

struct TraceJSON: Encodable {
    var time: Double
    var level: Int
    var title: String
    var subject: String
    var fields: [[String]]
}

/// One exchange in full.
struct ExchangeDetailJSON: Encodable {
    var exchange: ExchangeRowJSON
    var request: HeadJSON?
    var forwardedRequest: HeadJSON?
    var response: HeadJSON?
    var clientResponse: HeadJSON?
    var timings: ExchangeTimings?
    var requestBody: BodyInfoJSON?
    var responseBody: BodyInfoJSON?
    var connection: ConnectionJSON?
    var decision: DecisionJSON?
    var violations: [ViolationJSON]
    /// The connection's CFNetwork-style trace records around this exchange.
    var trace: [TraceJSON]
    /// The trace had more records for this exchange than shown.
    var traceTruncated: Bool
    /// `curl -x … --cacert …` repeating the request through the proxy.
    var curl: String
}

/// One host of the session summary.
struct HostJSON: Encodable {
    var host: String
    /// The proxy's own set-up site answered these exchanges: not the app's traffic.
    var proxySite: Bool
    var exchanges: Int
    /// Exchanges per verdict (`ok`, `blocked`, …).
    var verdicts: [String: Int]
    /// The worst verdict seen: blocked, violation, failed, notJudged, ok in that order.
    var verdict: String
    var errors: [String]
    /// The plist entry that decided its newest judged exchange (empty for ATS defaults).
    var decidedBy: String?
    var lastID: Int64
}

struct HostListJSON: Encodable {
    /// The app's hosts.
    var hosts: [HostJSON]
    /// The proxy's own set-up site, by the host the client named (`atsproxy.invalid`, the proxy's address).
    var proxySite: [HostJSON]
    /// Every exchange of the capture, the proxy's own included.
    var exchanges: Int
}

/// The Rules panel: the rules in the proxy's book and what the detail pane's pickers offer.
struct RuleListJSON: Encodable {
    var rules: [WebRuleInfo]
    var faultKinds: [String]
    var throttleProfiles: [String]
}

/// `POST /api/rules/enabled` and `/api/rules/remove`.
struct RuleSwitchBody: Decodable {
    var id: String
    var enabled: Bool?
}

/// `POST /api/rules`: a rule made from exchange `exchange`; `kind` is `fault` (with `fault`, a KIND), `throttle`
/// (with `profile`) or `map-local`.
struct RuleCreateBody: Decodable {
    var exchange: Int64
    var kind: String
    var fault: String?
    var profile: String?
}

/// `POST /api/replay`: a captured exchange to send again (`exchange`), with any of the other fields changing it; or,
/// without `exchange`, a request written from scratch (`method` and `url` required).
struct ReplayBody: Decodable {
    var exchange: Int64?
    var method: String?
    var url: String?
    var headers: [[String]]?
    /// The body as text (UTF-8).
    var body: String?
}

/// What the proxy answered a replay or a composed request, and the row it made.
struct ReplayAnswerJSON: Encodable {
    var status: Int
    var reason: String
    var headers: [[String]]
    var bodySize: Int
    /// The body's first 64 KiB as text (the capture keeps it whole: see the new row).
    var body: String
    var replayOf: Int64?
    /// The new row's id, once the capture committed it (absent when it did not within a few seconds).
    var exchange: Int64?
}

struct InfoJSON: Encodable {
    var version: String
    var live: Bool
    var proxyAddress: String?
    var proxyURL: String?
    var caPath: String?
    var onboardingURL: String?
    var policy: String
    var iosProfile: String
    var atsMode: String
    var blockStyle: String?
    var capturePath: String
    var captureIsTemporary: Bool
    var exchanges: Int64
    var features: [String: Bool]
    /// `--mode transparent`: the devices' QUIC attempts refused so far (absent in other modes).
    var quicAttemptsRefused: Int?
}
