import ATSPolicy
import HTTP1Core
import ProxyTrace
import TLSCore

// Theory of operation: the connection point of the rules stage, for the rules that fail a connection on purpose
// (`--fault HOST=KIND`, `--block-list HOST[=reset|refuse]`; InjectedFailure says what each kind does). It runs
// where a connection's target is first known, and before anything that would contact the upstream (a tunnel, an
// interception's upstream leg): a rule the user wrote for a host wins over passthrough, since no upstream is
// involved either way.
//
// 1. A CONNECT (FrontLayer.connect): the CONNECT's host is asked. A failure answered at the CONNECT (offline, dns,
//    refuse) ends the connection there; any other is kept in `injected`, the CONNECT gets its 200 and the
//    client's first bytes are awaited as usual.
// 2. The client's first bytes (SessionContext+Sniffing): with a failure kept, or in transparent mode (no CONNECT:
//    the ClientHello's SNI, else the original destination, is asked), a ClientHello is reset, never answered, or
//    answered by a flawed server (an InterceptLayer with no upstream, whose `fault` picks the client leg's
//    context: InterceptLayer+Fault). Bytes that are not TLS cannot be shown a flawed server: reset, whatever the
//    kind.
// 3. A plain `http://` request (PlainLayer; each may name another host on one keep-alive connection) is asked by
//    its URL's host before the request-head rules: reset and block reset reset the connection, offline, dns and
//    refuse answer 502, timeout answers 504 as the proxy answers a silent server, and the TLS kinds, which have no
//    TLS to flaw on http://, answer 502 saying so. Requests the layer answered itself (an ATS -1022) stay as they are.
// 4. Every such connection is one exchange record with the rule in `rules`, a note saying the failure was
//    injected, the app's error in `errors`, and the action `injected`, which the report leaves out.
//
// Nothing here runs without rules: both points are behind `env.rules != nil`.

extension SessionContext {
    /// At a CONNECT, before its 200: true when a rule fails the connection (answered here, or kept for the client's
    /// first bytes, the 200 sent and sniffing started).
    func injectAtConnect(host: String, port: Int, leftover: [UInt8], established: [UInt8]) -> Bool {
        guard var failure = injectedFailure(host: host, port: port) else { return false }
        failure.started = now()
        if case .answerConnect(let status) = failure.plan {
            let body = failure.connectAnswerBody(host: host, port: port)
            logInjected(
                failure, url: InterceptLayer.httpsURL(host: host, port: port), status: status, kind: .http,
                what: "the CONNECT was answered \(status) without contacting \(host)",
                responseBytes: body.utf8.count)
            answerAndClose(status: status, body: body, extra: [("X-ATS-Injected-Fault", failure.label)])
            return true
        }
        injected = failure
        commands.append(.sendToClient(established))
        startClientHelloDeadline()
        sniff(host: host, port: port, buffer: leftover)
        return true
    }

    /// At a whole ClientHello: true when a rule fails the connection (kept from the CONNECT, or, in transparent
    /// mode, asked now of the name the hello gives).
    func injectAtClientHello(connectHost: String, port: Int, hello: ClientHello, helloBytes: [UInt8]) -> Bool {
        let host = hello.serverName.map { $0.lowercased() }.flatMap { Self.isPlausibleDNSName($0) ? $0 : nil }
            ?? connectHost.lowercased()
        var failure: InjectedFailure
        if let kept = injected {
            failure = kept
        } else if transparentDestination != nil, var found = injectedFailure(host: host, port: port) {
            found.started = now()
            failure = found
        } else {
            return false
        }
        injected = nil
        let url = InterceptLayer.httpsURL(host: host, port: port)
        switch failure.plan {
        case .answerConnect:
            // Transparent mode: there is no CONNECT to answer; the nearest a gateway can do is end the connection.
            logInjected(
                failure, url: url, status: nil, kind: .refusedHandshake,
                what: "no CONNECT to answer (transparent mode): the connection was reset at the ClientHello")
            closeAll(reset: true)
        case .reset:
            logInjected(failure, url: url, status: nil, kind: .refusedHandshake,
                what: "the connection was reset at the ClientHello")
            closeAll(reset: true)
        case .silence, .flawedServer:
            let layer = InterceptLayer(
                host: host, port: port, hello: hello, helloBytes: helloBytes, requirements: nil,
                decision: PolicyDecision(keyPath: [], reason: "a rule injects a failure (\(failure.label))"),
                started: failure.started)
            layer.fault = FaultState(failure: failure)
            phase = .intercepting(layer)
            layer.startInjectedClientLeg(self)
        }
        return true
    }

    /// The client's first bytes after a CONNECT a rule fails are not TLS: no flawed server can be shown (nor a
    /// ClientHello left unanswered), so the connection is reset.
    func injectWithoutTLS(host: String, port: Int) {
        guard let failure = injected else { return }
        injected = nil
        logInjected(
            failure, url: InterceptLayer.authority(host: host, port: port), status: nil, kind: .tunnel,
            what: "the client does not speak TLS, so no flawed server can be shown: the connection was reset")
        closeAll(reset: true)
    }

    /// The connection ends before the client's first bytes after a CONNECT a rule fails (it closed, or sent nothing
    /// within --client-timeout): its record says so.
    func logInjectedBeforeHello() {
        guard let failure = injected, case .sniffing(let host, let port, _) = phase else { return }
        injected = nil
        logInjected(
            failure, url: InterceptLayer.httpsURL(host: host, port: port), status: nil, kind: .refusedHandshake,
            what: "the client sent no ClientHello after the CONNECT's 200")
    }

    /// The connection point for a plain-HTTP request: the layer's decision, or what a fault or block rule for the
    /// URL's host makes of it (see the theory of operation); nil when the connection was reset.
    @inline(__always)
    func faultedPlain(_ decision: consuming RequestDecision) -> RequestDecision? {
        if env.rules == nil { return decision }
        return applyPlainFault(decision)
    }

    private func applyPlainFault(_ decision: consuming RequestDecision) -> RequestDecision? {
        guard case .forward(let head, let url, _, _, _, _, _) = decision else { return decision }
        let (host, port) = Self.hostAndPort(ofURL: url)
        guard var failure = injectedFailure(host: host, port: port) else { return decision }
        failure.started = now()
        let status: Int
        let body: String
        switch failure.plan {
        case .reset:
            trace(.injectedFailure(url: url, rules: failure.applied, what: failure.note("the connection was reset")))
            var record = ExchangeSummary(
                method: head.method, url: url, status: nil, httpVersion: "HTTP/1.1", outcome: .notEvaluated,
                errors: failure.errors, requestBytes: 0, responseBytes: 0, durationMilliseconds: 0,
                note: failure.note("the connection was reset at the request"))
            record.rules = failure.applied
            recordExchange(record)
            closeAll(reset: true)
            return nil
        case .answerConnect(let s):
            (status, body) = (s, failure.connectAnswerBody(host: host, port: port))
        case .silence:
            status = 504
            body = "ATSProxy: injected failure, not the server's: timeout: the proxy answers as it answers a server "
                + "that never responds (the app gets this 504 from its HTTP proxy). Rule: "
                + failure.applied.map(\.summary).joined(separator: "; ") + "\n"
        case .flawedServer:
            status = 502
            body = "ATSProxy: injected failure, not the server's: \(failure.label) flaws a TLS server, and http:// "
                + "has none; answered 502 instead, the server not contacted. Rule: "
                + failure.applied.map(\.summary).joined(separator: "; ") + "\n"
        }
        trace(.injectedFailure(url: url, rules: failure.applied, what: failure.note("answered \(status)")))
        var response = HTTPResponseHead(status: status, reason: status == 504 ? "Gateway Timeout" : "Bad Gateway")
        response.headers.add(name: "Content-Type", value: "text/plain; charset=utf-8")
        response.headers.add(name: "X-ATS-Injected-Fault", value: failure.label)
        return .answer(
            head: response, body: Array(body.utf8), url: url, outcome: .notEvaluated, codes: failure.errors,
            rules: ExchangeRules(applied: failure.applied, response: nil))
    }

    /// One record for a connection a rule failed: the rule in `rules`, the app's error, a note that says it was
    /// injected.
    func logInjected(
        _ failure: InjectedFailure, url: String, status: Int?, kind: ExchangeKind, what: String, responseBytes: Int = 0
    ) {
        let duration = max(0, (now() - failure.started) * 1000)
        trace(.injectedFailure(url: url, rules: failure.applied, what: failure.note(what)))
        if let error = failure.errors.first {
            // The app's task fails as the flawed server or network makes it fail.
            let description = NSErrorDescription(urlError: error.urlError, sslError: error.sslError, failingURL: url)
            trace(.didFail(totalMilliseconds: duration, error: description))
        }
        var record: ExchangeSummary
        if kind == .http {
            record = ExchangeSummary(
                method: "CONNECT", url: url, status: status, httpVersion: "HTTP/1.1", outcome: .notEvaluated,
                errors: failure.errors, requestBytes: 0, responseBytes: responseBytes,
                durationMilliseconds: duration, note: failure.note(what))
        } else {
            record = ExchangeSummary(
                method: "CONNECT", url: url, status: status, kind: kind, outcome: .notEvaluated,
                errors: failure.errors, requestBytes: 0, responseBytes: responseBytes,
                durationMilliseconds: duration, note: failure.note(what))
        }
        record.rules = failure.applied
        recordExchange(record)
    }
}
