import ATSPolicy
import HTTP1Core
import ProxyTrace

// What a session tells the user, all as `.log` commands the adapter formats: notices, CFNetwork-style diagnostics
// records (only built with `--diagnostics`), JSON events (only built with `--log-json`) and the console line of each
// exchange.

extension SessionContext {
    /// Level 3 diagnostics: the plaintext each side sent, as CFNetwork's `SSL-READ`/`SSL-WRITE` dumps.
    func dumpPlaintext(_ bytes: [UInt8], toClient: Bool) {
        guard env.diagnosticsLevel >= 3, !bytes.isEmpty else { return }
        // From the app's point of view, bytes to the client were read from the server, and vice versa.
        trace(.hexDump(connectionID: id, read: toClient, bytes: bytes))
    }

    /// ` (mapped to ADDR:PORT)` when --map sends the host elsewhere, so that a mapping mistake shows at once; empty
    /// otherwise.
    func mappingNote(host: String, port: Int) -> String {
        mappedAddress(host: host, port: port).map { " (mapped to \($0))" } ?? ""
    }

    /// `ADDR:PORT` where --map sends the host, nil when it is not mapped.
    func mappedAddress(host: String, port: Int) -> String? {
        let (address, mappedPort) = env.upstreamAddress(host: host, port: port)
        return address == host && mappedPort == port ? nil : "\(address):\(mappedPort)"
    }

    /// A notice on stderr. `kind` folds repeats whose text varies (host, error detail) as one kind.
    func notice(_ text: String, kind: String? = nil) {
        commands.append(.log(.notice(text, kind: kind)))
    }

    func trace(_ record: @autoclosure () -> DiagnosticsRecord) {
        guard env.diagnosticsLevel > 0 else { return }
        commands.append(.log(.diagnostics(record())))
    }

    /// The start of an intercepted request that goes upstream. Not made when only a capture wants traces: the
    /// exchange record says so (`RebuiltTrace.requestStart`) and a reader rebuilds both records from it.
    func traceRequestStart(method: String, url: String, head: HTTPRequestHead, httpVersion: String = "HTTP/1.1") {
        guard env.exchangeTraces else { return }
        trace(.loaderWhatToDo(method: method, url: url))
        traceEnqueue(url: url, head: head, httpVersion: httpVersion)
    }

    func traceEnqueue(url: String, head: HTTPRequestHead, httpVersion: String = "HTTP/1.1") {
        // The request headers are a level-2 field: not built below it (a capture keeps the request head in the
        // exchange's row).
        trace(.protocolEnqueue(
            method: head.method, url: url, httpVersion: httpVersion,
            headers: env.diagnosticsLevel < 2 ? nil : head.headers.fields.map { ($0.name, $0.value) }))
    }

    func traceDecision(url: String, decision: PolicyDecision, violations: [ATSViolation], action: String) {
        trace(.atsDecision(url: url, decision: decision, violations: violations, action: action))
        if env.jsonEvents {
            commands.append(.log(.event(TraceEvent(
                kind: .atsDecision, time: now(), connectionID: id, url: url, decision: decision,
                violations: violations, message: action))))
        }
    }

    func logExchange(_ exchange: ExchangeSummary) {
        if env.mode == .mirror, exchange.mirror == nil,
            let record = interception?.mirror?.record ?? plain?.mirrorRecord
        {
            // Every exchange of a mirrored connection carries what the device did with it.
            var noted = exchange
            noted.mirror = record
            logExchange(noted)
            return
        }
        if exchange.note == nil, let fallback = interception?.block.fallback {
            // Copied only here: a copy of every exchange cost about 1% of a keep-alive request's instructions.
            var noted = exchange
            noted.note = fallback
            logExchange(noted)
            return
        }
        if exchange.outcome == .blocked || exchange.outcome == .failed,
            let violation = interception?.violations.first ?? lastPlainBlock
        {
            // The app got an error, not the block answer the proxy sent in its place (traced as Response Error).
            trace(.didFail(
                totalMilliseconds: exchange.durationMilliseconds,
                error: NSErrorDescription(violation: violation, failingURL: exchange.url)))
        } else if !env.exchangeTraces {
            // Left to the capture's reader, which rebuilds them from the record (`RebuiltTrace.finish`).
            recordExchange(exchange, finishTraced: false)
            return
        } else {
            if let status = exchange.status {
                // Level 2 shows the response headers the client got. Inside the autoclosure: nothing is read without
                // --diagnostics. Only from level 2: a capture records every exchange's heads (so the detail is there
                // at level 1 too) and keeps the response head in the exchange's row; the copy cost it a few µs each.
                trace(.protocolReceived(
                    method: exchange.method, url: exchange.url, httpVersion: exchange.httpVersion, status: status,
                    headers: env.diagnosticsLevel < 2
                        ? nil
                        : exchange.detail.flatMap { $0.clientResponse ?? $0.response }
                            .map { $0.headers.fields.map { ($0.name, $0.value) } }))
            }
            trace(.didFinish(totalMilliseconds: exchange.durationMilliseconds, totalBytes: exchange.responseBytes))
        }
        recordExchange(exchange)
    }

    /// A 407 in the console and, with `--log-json`, in the JSON log: a device set up with a wrong or no proxy
    /// password otherwise fails with nothing to show why.
    func logAuthFailure(_ failure: ProxyAuthFailure) {
        let text = failure.consoleText
        notice(text)
        if env.jsonEvents {
            commands.append(.log(.event(TraceEvent(
                kind: .proxyAuthFailed, time: now(), connectionID: id, proxyAuth: failure, message: text))))
        }
    }

    /// One exchange in the console and, with `--log-json`, in the JSON log. `finishTraced`: false when the session
    /// left the exchange's Protocol Received and Did Finish records to the capture's reader.
    func recordExchange(_ exchange: ExchangeSummary, finishTraced: Bool = true, proxySite: Bool = false) {
        if let rules = throttleRules, exchange.rules.first != rules.first {
            // A throttled connection's exchanges say so (copied only then).
            recordExchange(withThrottleRules(exchange, rules), finishTraced: finishTraced, proxySite: proxySite)
            return
        }
        let exchange =
            env.recording == nil ? exchange : recorded(exchange, finishTraced: finishTraced, proxySite: proxySite)
        commands.append(.log(.exchange(exchange)))
        if env.jsonEvents {
            commands.append(.log(.event(TraceEvent(
                kind: .exchange, time: now(), connectionID: id, url: exchange.url, exchange: exchange))))
        }
    }
}
