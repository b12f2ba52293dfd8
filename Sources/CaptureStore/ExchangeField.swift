/// The values of an exchange row, in the order of an exchange frame (`CaptureBatch`): the one declaration of the
/// `exchanges` columns. The capture file's table (`CaptureSchema`), the team store's (`PostgresSchema`), the
/// writers' INSERT and COPY column lists, and the order in which `CaptureEncoder` writes a frame's values (it walks
/// `allCases`) all follow from it; the readers read columns by name.
///
/// Once released, a case is never edited, removed or moved. A new column is a new case at the end and a new schema
/// step that adds it (`ALTER TABLE exchanges ADD COLUMN`, `addColumnSQL`), since a released step's `CREATE TABLE`
/// must not change: `tableLines` writes step 1's columns only (`firstStep`); `addedLater` lists the rest.
enum ExchangeField: CaseIterable {
    case connectionID, started, requestSent, firstResponseByte, ended, method, url, host, status, httpVersion,
        outcome, action, errors, urlError, sslError, requestBytes, responseBytes, durationMilliseconds, interruption,
        note, upstreamTLSVersion, upstreamTLSSuite, upstreamALPN, upstreamSNI, upstreamResumed, requestHead,
        forwardedRequestHead, responseHead, clientResponseHead, upstreamAddress, mirror, rebuiltTrace,
        // Added by capture step "v2 applied rules" and team store step "3 applied rules".
        rules,
        // Added by capture step "v3 replay of" and team store step "4 replay of".
        replayOf

    /// A column's storage class, the same in SQLite and PostgreSQL.
    enum Kind {
        case integer, real, text

        var postgres: String {
            switch self {
            case .integer: "BIGINT"
            case .real: "DOUBLE PRECISION"
            case .text: "TEXT"
            }
        }

        var sqlite: String {
            switch self {
            case .integer: "INTEGER"
            case .real: "REAL"
            case .text: "TEXT"
            }
        }
    }

    /// The column's name, its kind, whether every row has a value, and what it holds when its name does not say.
    var column: (name: String, kind: Kind, notNull: Bool, note: String?) {
        switch self {
        case .connectionID: ("connection_id", .integer, false, "the trace's Connection ID, per run")
        case .started: ("started", .real, true, "Unix seconds")
        case .requestSent: ("request_sent", .real, false, nil)
        case .firstResponseByte: ("first_response_byte", .real, false, nil)
        case .ended: ("ended", .real, true, nil)
        case .method: ("method", .text, true, nil)
        case .url: ("url", .text, true, nil)
        case .host: ("host", .text, true, "lowercased, without port; '' when the URL has none")
        case .status: ("status", .integer, false, nil)
        case .httpVersion: ("http_version", .text, true, nil)
        case .outcome: ("outcome", .text, true, "allowed, blocked, violation, notEvaluated, failed")
        case .action: ("action", .text, false, "relayed, annotated, blockedHandshake, ... (ExchangeAction)")
        case .errors: ("errors", .text, true, "the console's codes: -1200/-9836,-1202 ('' when none)")
        case .urlError: ("url_error", .integer, false, "the first error's codes: what the app's task fails with")
        case .sslError: ("ssl_error", .integer, false, nil)
        case .requestBytes: ("request_bytes", .integer, true, nil)
        case .responseBytes: ("response_bytes", .integer, true, nil)
        case .durationMilliseconds: ("duration_ms", .real, true, nil)
        case .interruption: ("interruption", .text, false, nil)
        case .note: ("note", .text, false, nil)
        case .upstreamTLSVersion: ("upstream_tls_version", .text, false, nil)
        case .upstreamTLSSuite: ("upstream_tls_suite", .text, false, nil)
        case .upstreamALPN: ("upstream_alpn", .text, false, nil)
        case .upstreamSNI: ("upstream_sni", .text, false, nil)
        case .upstreamResumed: ("upstream_resumed", .integer, false, nil)
        case .requestHead: ("request_head", .text, false, "HTTP/1 text, as the client sent it")
        case .forwardedRequestHead: ("forwarded_request_head", .text, false, "as it went upstream, when different")
        case .responseHead: ("response_head", .text, false, "as the upstream sent it")
        case .clientResponseHead: ("client_response_head", .text, false, "as the client got it, when different")
        case .upstreamAddress: ("upstream_address", .text, false, "where the upstream connection went (HAR's serverIPAddress)")
        case .mirror: ("mirror", .text, false, "--ats mirror: what the device was shown and did (MirrorRecord JSON)")
        case .rebuiltTrace: ("rebuilt_trace", .integer, false, "RebuiltTrace bits; NULL: the records are stored")
        case .rules: ("rules", .text, false, "the rules that acted (JSON array of AppliedRule); NULL: none")
        case .replayOf: ("replay_of", .integer, false, "the exchange this one replays (issue 34); NULL: not a replay")
        }
    }

    /// Every field, in the order of a frame: `allCases` kept in one array rather than made at each use.
    static let inOrder: [ExchangeField] = allCases

    /// The columns of a frame, in order.
    static let names: [String] = allCases.map(\.column.name)

    /// The columns of step 1's `CREATE TABLE` (a released step: it never grows).
    static let firstStep: [ExchangeField] = Array(allCases.prefix { $0 != .rules })

    /// The columns added after step 1, in order: nullable each (rows written before read as NULL).
    static let addedLater: [ExchangeField] = Array(allCases.drop { $0 != .rules })

    /// `ALTER TABLE exchanges ADD COLUMN …`, for a column of `addedLater`.
    func addColumnSQL(postgres: Bool) -> String {
        let c = column
        return "ALTER TABLE exchanges ADD COLUMN \(c.name) \(postgres ? c.kind.postgres : c.kind.sqlite)"
    }

    /// Step 1's `exchanges` columns after `id`, `run_id` and the references, as lines of a `CREATE TABLE`
    /// (`name TYPE [NOT NULL],` then the note as a comment); `last` ends the table (no comma).
    static func tableLines(postgres: Bool, last: Bool) -> String {
        firstStep.enumerated().map { i, field in
            let c = field.column
            let comma = last && i == firstStep.count - 1 ? "" : ","
            let line = "\(c.name) \(postgres ? c.kind.postgres : c.kind.sqlite)\(c.notNull ? " NOT NULL" : "")\(comma)"
            return "    " + line + (c.note.map { " -- \($0)" } ?? "")
        }.joined(separator: "\n")
    }
}
