import ATSPolicy
import CaptureStore
import Foundation
import HTTP1Core
import ProxyTrace

/// What the connection does with a request: answer it, or turn into a live stream of the exchanges matching the
/// query, starting after the exchange `after`.
public enum WebRoute: Sendable {
    case respond(WebResponse)
    case stream(filter: CaptureFilter, after: Int64)
}

/// The web view's routes, sans-io: a parsed request in, a response value (or a stream to start) out. Reads the
/// capture; never touches a socket. Its calls block on SQLite, so the server runs them off the event loops.
///
/// Routes (docs/web.md):
/// - `GET /`, `/app.js`, `/style.css`: the page, from the binary.
/// - `GET /api/info`: where the proxy listens, policy, profile, capture, features.
/// - `GET /api/exchanges?filters&before=ID|after=ID&limit=N`: a page of the list.
/// - `GET /api/exchanges/count?filters`: how many match.
/// - `GET /api/exchanges/ID`: one exchange in full.
/// - `GET /api/exchanges/ID/body/request|response`: the body bytes kept.
/// - `GET /api/hosts`: the session summary per host.
/// - `GET /api/stream?filters&after=ID`: Server-Sent Events of new exchanges.
/// - `GET /api/report`, `/api/report/text`, `/api/report/plist`, `/api/har?filters`: when wired
///   (`WebViewExtensions`).
/// - `GET /api/rules`: the rules in force; `POST /api/rules` (a rule made from an exchange),
///   `POST /api/rules/enabled` (switch one), `POST /api/rules/remove` (a rule made here): when wired (`run --web`).
/// - `GET /api/held`: the exchanges breakpoints hold now; `POST /api/held/ID`: execute (as edited), abort or answer
///   one (`WebHolds.swift`): when wired (`run --web`).
///
/// The POST routes change what the proxy does, so they take only a same-origin request (`crossSiteRefusal`): a JSON
/// body (a cross-site form cannot send one, and a cross-site script's must pass a CORS preflight this server never
/// grants), and `Origin` and `Sec-Fetch-Site`, when the browser sends them, naming this page. The credentials and
/// the loopback `Host` check (`WebServer`) come first, as for every route.
public final class WebRouter: Sendable {
    public let reader: CaptureReader
    public let context: WebViewContext
    private let hosts = HostTotals()

    /// Rows the stream sends at once; more pending than this and it asks the page to re-sync from the API.
    public static let streamBatch = 200
    /// Trace records shown with one exchange.
    static let traceLimit = 400

    /// The streams' own connection to the file: their looks for new rows (a millisecond each) never wait behind a
    /// slow request of the page (a filtered count, a text no exchange contains: most of a second in a big capture).
    public let streamReader: CaptureReader

    /// The slow routes' own connection to the file (`runsLong`: the session report and HAR export, seconds on a big
    /// capture): while one runs, the page's other requests are read on `reader` and answered.
    public let exportReader: CaptureReader

    /// - Parameters:
    ///   - streamReader: a second reader of the same file for the live streams; nil shares `reader`.
    ///   - exportReader: another for the report and HAR export; nil shares `reader` (which then waits for them).
    public init(
        reader: CaptureReader, streamReader: CaptureReader? = nil, exportReader: CaptureReader? = nil,
        context: WebViewContext
    ) {
        self.reader = reader
        self.streamReader = streamReader ?? reader
        self.exportReader = exportReader ?? reader
        self.context = context
    }

    /// Whether `request` is one of the routes that read the whole capture (the report, HAR export): the server runs
    /// them on a queue of their own, so they never hold up the list or `/api/info`.
    public static func runsLong(_ request: WebRequest) -> Bool {
        request.path == "/api/har" || request.path.hasPrefix("/api/report") || request.path == "/api/replay"
    }

    public func route(_ request: WebRequest) -> WebRoute {
        if request.method == "POST", request.path == "/api/rules" || request.path.hasPrefix("/api/rules/") {
            return .respond(postRules(request))
        }
        if request.method == "POST", request.path.hasPrefix("/api/held/") {
            let id = request.path.dropFirst("/api/held/".count)
            guard !id.isEmpty, !id.contains("/") else { return .respond(.problem(404, "no such held route: \(request.path)")) }
            return .respond(postHeld(request, id: String(id)))
        }
        if request.path == "/api/replay" {
            guard request.method == "POST" else {
                var response = WebResponse.problem(405, "replay takes POST (got \(request.method))")
                response.headers.add(name: "Allow", value: "POST")
                return .respond(response)
            }
            return .respond(postReplay(request))
        }
        guard request.method == "GET" || request.method == "HEAD" else {
            let rules = request.path == "/api/rules" || request.path.hasPrefix("/api/rules/")
                || request.path.hasPrefix("/api/held/")
            var response = WebResponse.problem(
                405, "the web view only answers GET and HEAD\(rules ? " (and POST here)" : "") (got \(request.method))")
            response.headers.add(name: "Allow", value: rules ? "GET, HEAD, POST" : "GET, HEAD")
            return .respond(response)
        }
        do throws(CaptureFileError) {
            return try route(request, path: request.path.split(separator: "/", omittingEmptySubsequences: true))
        } catch {
            return .respond(.problem(500, error.description))
        }
    }

    private func route(_ request: WebRequest, path: [Substring]) throws(CaptureFileError) -> WebRoute {
        let parts = path.map(String.init)
        switch parts {
        case []: return .respond(asset(WebAssets.indexHTML, type: "text/html; charset=utf-8", page: true))
        case ["app.js"]: return .respond(asset(WebAssets.appJS, type: "text/javascript; charset=utf-8"))
        case ["style.css"]: return .respond(asset(WebAssets.styleCSS, type: "text/css; charset=utf-8"))
        case ["api", "info"]: return .respond(try info())
        case ["api", "exchanges"]: return .respond(try list(request))
        case ["api", "exchanges", "count"]:
            let query: WebListQuery
            do { query = try WebListQuery(request, paging: false) } catch {
                return .respond(.problem(400, error.message))
            }
            return .respond(.json(["count": try reader.count(matching: query.filter)]))
        case ["api", "hosts"]: return .respond(try hostSummary())
        case ["api", "stream"]:
            let query: WebListQuery
            do { query = try WebListQuery(request) } catch { return .respond(.problem(400, error.message)) }
            let after: Int64
            if let given = query.after { after = given } else { after = try reader.latestID() }
            return .stream(filter: query.filter, after: after)
        case ["api", "report"]: return .respond(report(.json))
        case ["api", "report", "plist"]: return .respond(report(.plist))
        case ["api", "report", "text"]: return .respond(report(.text))
        case ["api", "har"]: return .respond(har(request))
        case ["api", "held"]: return .respond(heldList())
        case ["api", "rules"]:
            guard let control = context.extensions.rules else {
                return .respond(.problem(404, "rules are changed only by a running proxy (atsproxy run --web)"))
            }
            return .respond(.json(RuleListJSON(
                rules: control.list(), faultKinds: control.faultKinds, throttleProfiles: control.throttleProfiles)))
        default: break
        }
        // /api/exchanges/ID and /api/exchanges/ID/body/request|response
        if parts.count >= 3, parts[0] == "api", parts[1] == "exchanges" {
            guard let id = Int64(parts[2]) else {
                return .respond(.problem(404, "no exchange '\(parts[2])': ids are numbers"))
            }
            if parts.count == 3 { return .respond(try detail(id)) }
            if parts.count == 5, parts[3] == "body" {
                guard parts[4] == "request" || parts[4] == "response" else {
                    return .respond(.problem(404, "no body '\(parts[4])': request or response"))
                }
                return .respond(try body(id, request: parts[4] == "request"))
            }
        }
        return .respond(.problem(404, "no such page or API route: \(request.path)"))
    }

    // MARK: - Static files

    private func asset(_ text: String, type: String, page: Bool = false) -> WebResponse {
        var response = WebResponse(status: 200, headers: [("Content-Type", type)], body: Array(text.utf8))
        if page {
            // Everything the page loads is its own: no inline script, nothing from elsewhere, not framed.
            response.headers.add(
                name: "Content-Security-Policy",
                value: "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; "
                    + "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
            response.headers.add(name: "Referrer-Policy", value: "no-referrer")
        }
        return response
    }

    // MARK: - API

    private func info() throws(CaptureFileError) -> WebResponse {
        let c = context
        let onboarding = c.proxyAddress.map { "http://\($0)/" }
        return .json(InfoJSON(
            version: c.version, live: c.live, proxyAddress: c.proxyAddress, proxyURL: c.proxyURL, caPath: c.caPath,
            onboardingURL: onboarding, policy: c.policy, iosProfile: c.iosProfile, atsMode: c.atsMode,
            blockStyle: c.blockStyle, capturePath: c.capturePath, captureIsTemporary: c.captureIsTemporary,
            exchanges: try reader.latestID(),
            features: [
                "report": c.extensions.reportFindings != nil, "har": c.extensions.harExport != nil,
                "rules": c.extensions.rules != nil, "breakpoints": c.extensions.holds != nil,
                "replay": c.extensions.replay != nil,
            ],
            quicAttemptsRefused: c.extensions.quicAttemptsRefused?()))
    }

    private func list(_ request: WebRequest) throws(CaptureFileError) -> WebResponse {
        let query: WebListQuery
        do { query = try WebListQuery(request) } catch { return .problem(400, error.message) }
        // One more than asked, to tell whether another page follows.
        let rows = try reader.summaries(
            matching: query.filter, limit: query.limit + 1, before: query.before, after: query.after)
        return .json(ExchangeListJSON(
            exchanges: rows.prefix(query.limit).map(ExchangeRowJSON.init), more: rows.count > query.limit))
    }

    /// New exchanges for a stream: at most `streamBatch` after `after`, oldest first, and whether more are
    /// pending (then the stream tells the page to re-sync instead of sending them all).
    public func streamUpdate(filter: CaptureFilter, after: Int64) throws(CaptureFileError) -> StreamUpdate {
        let rows = try streamReader.summaries(matching: filter, limit: Self.streamBatch + 1, after: after)
        if rows.count > Self.streamBatch { return .resync(latest: try streamReader.latestID()) }
        guard let last = rows.last else { return .nothing }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            let data = try encoder.encode(ExchangeListJSON(exchanges: rows.map(ExchangeRowJSON.init), more: false))
            return .rows(json: Array(data), last: last.id)
        } catch {
            return .resync(latest: last.id)
        }
    }

    private func detail(_ id: Int64) throws(CaptureFileError) -> WebResponse {
        guard let exchange = try reader.exchange(id: id) else {
            return .problem(404, "no exchange \(id) in the capture")
        }
        let e = exchange.record
        let detail = e.detail
        let connection = e.connection
        var trace: [TraceJSON] = []
        var traceTruncated = false
        if connection != nil {
            let records = try reader.traceRecords(of: exchange, limit: Self.traceLimit + 1)
            traceTruncated = records.count > Self.traceLimit
            trace = records.prefix(Self.traceLimit).map { r in
                TraceJSON(
                    time: r.time, level: r.record.level, title: r.record.title, subject: r.record.subject,
                    fields: r.record.fields.map { [$0.key, $0.value] })
            }
        }
        let violations = (connection?.violations ?? []).map { v in
            ViolationJSON(
                kind: v.kind.rawValue, explanation: v.explanation, urlError: v.urlError.code,
                urlErrorName: v.urlError.name, sslError: v.sslError?.code, sslErrorName: v.sslError?.name,
                appError: NSErrorDescription(violation: v, failingURL: e.url).description, fix: v.fix.summary,
                fixPlist: v.fix.plistSnippet, certificateIndex: v.certificateIndex, notes: v.notes)
        }
        let responseHead = detail?.response ?? detail?.clientResponse
        return .json(ExchangeDetailJSON(
            exchange: ExchangeRowJSON(exchange),
            request: detail?.request.map(HeadJSON.init), forwardedRequest: detail?.forwardedRequest.map(HeadJSON.init),
            response: detail?.response.map(HeadJSON.init), clientResponse: detail?.clientResponse.map(HeadJSON.init),
            timings: detail?.timings,
            requestBody: Self.bodyInfo(detail?.requestBody, head: detail?.request?.headers),
            responseBody: Self.bodyInfo(detail?.responseBody, head: responseHead?.headers),
            connection: connection.map {
                ConnectionJSON(
                    id: $0.connectionID, clientAddress: $0.clientAddress, clientTLS: $0.clientTLS,
                    upstreamTLS: $0.upstreamTLS, upstreamHandshake: $0.upstreamHandshake)
            },
            decision: connection?.decision.map {
                DecisionJSON(decidedBy: $0.keyPathString, reason: $0.reason, notes: $0.notes)
            },
            violations: violations, trace: trace, traceTruncated: traceTruncated,
            curl: CurlCommand.make(
                for: e, proxyURL: context.proxyURL ?? "http://127.0.0.1:8080",
                caPath: context.caPath ?? "certs/atsproxy-ca.pem")))
    }

    private static func bodyInfo(_ body: CapturedBody?, head: HTTPHeaders?) -> BodyInfoJSON? {
        guard let body else { return nil }
        return BodyInfoJSON(
            size: body.totalBytes, kept: body.bytes.count, truncated: body.isTruncated,
            contentType: head?[first: "Content-Type"], contentEncoding: head?[first: "Content-Encoding"])
    }

    /// A body's kept bytes. Served so that the view's origin never runs them: a captured HTML or SVG body
    /// shown as a page would run its scripts with access to this API. Raster images keep their type (the page
    /// shows them); everything else is `application/octet-stream`, sandboxed.
    private func body(_ id: Int64, request: Bool) throws(CaptureFileError) -> WebResponse {
        guard let exchange = try reader.exchange(id: id) else {
            return .problem(404, "no exchange \(id) in the capture")
        }
        let detail = exchange.record.detail
        let body = request ? detail?.requestBody : detail?.responseBody
        guard let body else {
            return .problem(404, "exchange \(id) has no \(request ? "request" : "response") body in the capture")
        }
        let head = request ? detail?.request?.headers : (detail?.response ?? detail?.clientResponse)?.headers
        let declared = head?[first: "Content-Type"]?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased() ?? ""
        let safeImages: Set<String> = ["image/png", "image/jpeg", "image/gif", "image/webp", "image/avif", "image/bmp"]
        let type = safeImages.contains(declared) ? declared : "application/octet-stream"
        return WebResponse(
            status: 200,
            headers: [
                ("Content-Type", type), ("Content-Security-Policy", "sandbox; default-src 'none'"),
                ("Content-Disposition", "inline; filename=\"exchange-\(id)-\(request ? "request" : "response").bin\""),
                ("X-Body-Size", String(body.totalBytes)), ("X-Body-Truncated", body.isTruncated ? "1" : "0"),
            ],
            body: body.bytes)
    }

    private func hostSummary() throws(CaptureFileError) -> WebResponse {
        let (hosts, total) = try self.hosts.update(from: reader)
        // The proxy's own set-up site is listed apart: it is not the app's traffic.
        return .json(HostListJSON(
            hosts: hosts.filter { !$0.proxySite }, proxySite: hosts.filter(\.proxySite), exchanges: total))
    }

    private enum ReportForm { case json, text, plist }

    private func report(_ form: ReportForm) -> WebResponse {
        guard let make = context.extensions.reportFindings else {
            return .problem(404, "the session report is not part of this build")
        }
        do {
            let report = try make(exportReader)
            if form == .text {
                return WebResponse(
                    status: 200, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Array(report.readable.utf8))
            }
            if form == .plist {
                return WebResponse(
                    status: 200,
                    headers: [
                        ("Content-Type", "application/xml; charset=utf-8"),
                        ("Content-Disposition", "attachment; filename=\"suggested-ats.plist\""),
                    ],
                    body: Array(report.suggestedPlist.utf8))
            }
            return WebResponse(
                status: 200, headers: [("Content-Type", "application/json; charset=utf-8")], body: report.findingsJSON)
        } catch {
            return .problem(500, "cannot make the report: \(error)")
        }
    }

    // MARK: - Rules

    /// Why a POST is refused as not coming from this page, nil when it may go on (see the type's notes).
    static func crossSiteRefusal(_ request: WebRequest, what: String = "a change to the rules") -> String? {
        let type = request.headers[first: "Content-Type"]?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased()
        guard type == "application/json" else { return "\(what) is a POST of application/json" }
        if let site = request.headers[first: "Sec-Fetch-Site"]?.lowercased(), site != "same-origin" {
            return "\(what) must come from the web view's own page (Sec-Fetch-Site: \(site))"
        }
        if let origin = request.headers[first: "Origin"]?.lowercased() {
            let host = request.headers[first: "Host"]?.lowercased() ?? ""
            guard !host.isEmpty, origin == "http://" + host || origin == "https://" + host else {
                return "\(what) must come from the web view's own page (Origin: \(origin))"
            }
        }
        return nil
    }

    private func postRules(_ request: WebRequest) -> WebResponse {
        if let refusal = Self.crossSiteRefusal(request) { return .problem(403, refusal) }
        guard let control = context.extensions.rules else {
            return .problem(404, "rules are changed only by a running proxy (atsproxy run --web)")
        }
        let decoder = JSONDecoder()
        switch request.path {
        case "/api/rules/enabled", "/api/rules/remove":
            guard let body = try? decoder.decode(RuleSwitchBody.self, from: Data(request.body)) else {
                return .problem(400, "expected {\"id\": \"…\", \"enabled\": true|false}")
            }
            if request.path == "/api/rules/remove" {
                guard control.remove(body.id) else {
                    return .problem(404, "no rule '\(body.id)' made in the web view (others are switched off instead)")
                }
            } else {
                guard let enabled = body.enabled else { return .problem(400, "expected \"enabled\": true or false") }
                guard control.setEnabled(body.id, enabled) else { return .problem(404, "no rule '\(body.id)'") }
            }
            return .json(RuleListJSON(
                rules: control.list(), faultKinds: control.faultKinds, throttleProfiles: control.throttleProfiles))
        case "/api/rules":
            guard let body = try? decoder.decode(RuleCreateBody.self, from: Data(request.body)) else {
                return .problem(400, "expected {\"exchange\": ID, \"kind\": \"fault\"|\"throttle\"|\"map-local\"|\"breakpoint\", …}")
            }
            let made: WebRuleRequest
            switch body.kind {
            case "fault":
                guard let kind = body.fault, !kind.isEmpty else { return .problem(400, "a fault rule needs \"fault\": KIND") }
                made = .fault(kind: kind)
            case "throttle":
                guard let profile = body.profile, !profile.isEmpty else {
                    return .problem(400, "a throttle rule needs \"profile\": PROFILE")
                }
                made = .throttle(profile: profile)
            case "map-local": made = .mapLocal
            case "breakpoint": made = .breakpoint
            default: return .problem(400, "no rule kind '\(body.kind)': fault, throttle, map-local or breakpoint")
            }
            let exchange: CapturedExchange?
            do { exchange = try reader.exchange(id: body.exchange) } catch { return .problem(500, "\(error)") }
            guard let exchange else { return .problem(404, "no exchange \(body.exchange) in the capture") }
            switch control.create(made, exchange) {
            case .success(let rule): return .json(rule, status: 201)
            case .failure(let error): return .problem(422, error.message)
            }
        default:
            return .problem(404, "no such rules route: \(request.path)")
        }
    }

    /// `POST /api/replay`: sends a captured exchange's request again (as captured, or changed by the body's fields),
    /// or a request written from scratch, through the proxy (`ReplayClient`), and answers what came back with the
    /// new row's id once the capture has it. Runs on the long routes' queue: it waits for the network.
    private func postReplay(_ request: WebRequest) -> WebResponse {
        if let refusal = Self.crossSiteRefusal(request) { return .problem(403, refusal) }
        guard let client = context.extensions.replay else {
            return .problem(404, "requests are sent only by a running proxy (atsproxy run --web)")
        }
        guard let body = try? JSONDecoder().decode(ReplayBody.self, from: Data(request.body)) else {
            return .problem(400, "expected {\"exchange\": ID} or {\"method\": M, \"url\": U, \"headers\": [[n, v]…], \"body\": TEXT}")
        }
        var sent: ReplayRequest
        if let id = body.exchange {
            let exchange: CapturedExchange?
            do { exchange = try reader.exchange(id: id).map { try reader.withBodies($0) } } catch {
                return .problem(500, "\(error)")
            }
            guard let exchange else { return .problem(404, "no exchange \(id) in the capture") }
            switch ReplayRequest.captured(exchange, body: body.body.map { Array($0.utf8) }) {
            case .failure(let error): return .problem(422, error.message)
            case .success(let captured): sent = captured
            }
        } else {
            guard let method = body.method, let url = body.url else {
                return .problem(400, "a request written here needs \"method\" and \"url\"")
            }
            sent = ReplayRequest(method: method, url: url, headers: [], body: [], replayOf: nil)
        }
        if let method = body.method, !method.isEmpty { sent.method = method }
        if let url = body.url, !url.isEmpty { sent.url = url }
        if let headers = body.headers {
            guard headers.allSatisfy({ $0.count == 2 }) else { return .problem(400, "headers are [name, value] pairs") }
            sent.headers = headers.map { ($0[0], $0[1]) }
        }
        if let text = body.body { sent.body = Array(text.utf8) }
        let before: Int64
        do { before = try reader.latestID() } catch { return .problem(500, "\(error)") }
        let answer: ReplayAnswer
        do { answer = try client.send(sent) } catch { return .problem(502, error.message) }
        // The capture commits in batches: look for the new row for a few seconds (bounded), then answer without it.
        var made: Int64?
        for _ in 0..<100 {
            if let original = sent.replayOf {
                made = try? reader.replay(of: original, after: before)
            } else {
                made = try? reader.firstExchange(after: before, url: sent.url)
            }
            if made != nil { break }
            usleep(50_000)
        }
        return .json(ReplayAnswerJSON(
            status: answer.status, reason: answer.reason, headers: answer.headers, bodySize: answer.bodySize,
            body: String(decoding: answer.body.prefix(65_536), as: UTF8.self), replayOf: sent.replayOf,
            exchange: made))
    }

    private func har(_ request: WebRequest) -> WebResponse {
        guard let export = context.extensions.harExport else {
            return .problem(404, "HAR export is not part of this build")
        }
        let query: WebListQuery
        do { query = try WebListQuery(request, paging: false) } catch { return .problem(400, error.message) }
        do {
            return WebResponse(
                status: 200,
                headers: [
                    ("Content-Type", "application/json; charset=utf-8"),
                    ("Content-Disposition", "attachment; filename=\"atsproxy.har\""),
                ],
                body: try export(exportReader, query.filter))
        } catch {
            return .problem(500, "cannot export HAR: \(error)")
        }
    }
}

/// What a live stream sends next.
public enum StreamUpdate: Sendable, Equatable {
    case nothing
    /// An `exchanges` event: the rows as JSON, and the id of the last.
    case rows(json: [UInt8], last: Int64)
    /// A `resync` event: more arrived than the stream sends at once (or the page fell behind); the page reloads
    /// the newest page from the API, and the stream goes on after `latest`.
    case resync(latest: Int64)
}

/// The per-host totals of the whole capture, kept between calls and brought up to date with what arrived since
/// (one grouped query over the new exchanges), so the summary stays cheap in a long session.
final class HostTotals: @unchecked Sendable {
    // @unchecked: every field is touched only under `lock`.
    private let lock = NSLock()
    private var lastID: Int64 = 0
    private var hosts: [HostKey: [ExchangeSummary.ATSOutcome: CaptureHostCount]] = [:]

    private struct HostKey: Hashable {
        var host: String
        var proxySite: Bool
    }

    func update(from reader: CaptureReader) throws(CaptureFileError) -> ([HostJSON], Int) {
        lock.lock()
        defer { lock.unlock() }
        let fresh = try reader.hostCounts(afterID: lastID)
        for count in fresh {
            let key = HostKey(host: count.host, proxySite: count.proxySite)
            if var known = hosts[key]?[count.outcome] {
                known.count += count.count
                known.errors = Array(Set(known.errors + count.errors)).sorted()
                known.lastID = max(known.lastID, count.lastID)
                if let decidedBy = count.decidedBy { known.decidedBy = decidedBy }
                hosts[key]?[count.outcome] = known
            } else {
                hosts[key, default: [:]][count.outcome] = count
            }
            lastID = max(lastID, count.lastID)
        }
        let severity: [ExchangeSummary.ATSOutcome] = [.blocked, .violation, .failed, .notEvaluated, .allowed]
        var total = 0
        let list = hosts.map { key, counts -> HostJSON in
            let n = counts.values.reduce(0) { $0 + $1.count }
            total += n
            let worst = severity.first { counts[$0] != nil } ?? .allowed
            let newest = counts.values.max { $0.lastID < $1.lastID }
            let judged = counts.values.filter { $0.decidedBy != nil }.max { $0.lastID < $1.lastID }
            return HostJSON(
                host: key.host, proxySite: key.proxySite, exchanges: n,
                verdicts: Dictionary(
                    uniqueKeysWithValues: counts.map { (ExchangeRowJSON.verdict($0.key), $0.value.count) }),
                verdict: ExchangeRowJSON.verdict(worst),
                errors: Array(Set(counts.values.flatMap(\.errors))).sorted(),
                decidedBy: judged?.decidedBy, lastID: newest?.lastID ?? 0)
        }
        let order = ["blocked", "violation", "failed", "notJudged", "ok"]
        let rank = { (h: HostJSON) in order.firstIndex(of: h.verdict) ?? order.count }
        return (list.sorted { (rank($0), $0.host) < (rank($1), $1.host) }, total)
    }
}
