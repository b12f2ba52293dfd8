import ATSPolicy
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
// 3. Every such connection is one exchange record with the rule in `rules`, a note saying the failure was
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
