// Theory of operation
//
// 1. One LoadConnection speaks for one TCP connection of the load client, sans-io: the driver calls `start()` once
//    the socket is connected, `receive(_:)` with every read, `receiveEOF()` at the read EOF, and `sendRequest()`
//    whenever `isReady` and it wants another exchange. Each call returns a `LoadStep`: bytes to write, a completed
//    response, a failure. No clocks, no sockets: latency is the driver's business.
// 2. Phases: not started → [tunnelling →] [handshaking →] ready ⇄ awaiting response. A CONNECT (https through a proxy) is sent in
//    plaintext and must be answered 2xx; TLS starts on the bytes after that answer.
// 3. Strictly one request outstanding: the response parser is told about a request only when it is sent, so bytes
//    from the server while nothing is outstanding ("pipelined nothing") are a protocol error.
// 4. Any failure is final: the connection is unusable, the driver closes it and opens another.

import HTTP1Core
import TLSCore

/// One keep-alive client connection of a load run as a state machine (see the theory of operation above).
/// Confined to the loop thread that drives its socket; explicitly not `Sendable`.
final class LoadConnection {
    enum Phase: Equatable {
        /// The socket is not connected yet (`start()` not called).
        case notStarted
        /// CONNECT sent, its answer not read yet.
        case tunnelling
        case handshaking
        /// Ready for a request.
        case ready
        case awaitingResponse
        case failed(LoadFailure)
    }

    private(set) var phase: Phase = .notStarted
    private let recipe: ConnectionRecipe
    private var parser = HTTP1Parser(role: .responses)
    private var tls: TLSEngine?
    private var status = 0
    private var bodyBytes = 0

    init(recipe: ConnectionRecipe) {
        self.recipe = recipe
    }

    /// Whether `sendRequest()` may be called.
    var isReady: Bool { phase == .ready }

    /// Whether a request was sent and its response has not completed.
    var isAwaitingResponse: Bool { phase == .awaitingResponse }

    /// The socket is connected: the CONNECT request or the ClientHello to send, or nothing (plain http, ready).
    func start() -> LoadStep {
        var step = LoadStep()
        guard phase == .notStarted else { return step }
        if let tunnel = recipe.tunnelRequest {
            parser.expectResponse(toRequestMethod: "CONNECT")
            phase = .tunnelling
            step.send(tunnel)
        } else if recipe.tls != nil {
            startTLS(leftover: [], &step)
        } else {
            phase = .ready
        }
        return step
    }

    /// Sends the request (only when `isReady`; otherwise nothing happens).
    func sendRequest() -> LoadStep {
        var step = LoadStep()
        guard phase == .ready else { return step }
        parser.expectResponse(toRequestMethod: "GET")
        status = 0
        bodyBytes = 0
        phase = .awaitingResponse
        if let tls {
            do {
                try tls.write(recipe.request)
            } catch {
                fail(.tls(error), &step)
                return step
            }
            step.send(tls.takeOutput())
        } else {
            step.send(recipe.request)
        }
        return step
    }

    /// Bytes read from the socket.
    func receive(_ bytes: UnsafeRawBufferPointer) -> LoadStep {
        var step = LoadStep()
        switch phase {
        case .notStarted, .failed:
            return step
        case .tunnelling:
            parser.receive(bytes)
            advanceHTTP(&step)
        case .handshaking, .ready, .awaitingResponse:
            if let tls {
                tls.feed(bytes)
                advanceTLS(tls, &step)
            } else {
                parser.receive(bytes)
                advanceHTTP(&step)
            }
        }
        return step
    }

    /// The server closed its sending side. A close-delimited response may complete; then the connection fails.
    func receiveEOF() -> LoadStep {
        var step = LoadStep()
        switch phase {
        case .notStarted, .failed:
            return step
        case .tunnelling:
            parser.receiveEOF()
            advanceHTTP(&step)
        case .handshaking, .ready, .awaitingResponse:
            if let tls {
                tls.feedEndOfInput()
                advanceTLS(tls, &step)
            } else {
                parser.receiveEOF()
                advanceHTTP(&step)
            }
        }
        // Whatever the parser made of it, nothing more can come on this connection.
        if case .failed = phase {} else { fail(.closedByServer, &step) }
        return step
    }

    // MARK: - TLS

    private func startTLS(leftover: [UInt8], _ step: inout LoadStep) {
        guard let context = recipe.tls else { return }
        let engine: TLSEngine
        do {
            engine = try TLSEngine(context: context, serverName: recipe.serverName)
        } catch {
            fail(.tls(.localFailure(alertSent: nil, error: error)), &step)
            return
        }
        tls = engine
        phase = .handshaking
        engine.feed(leftover)
        advanceTLS(engine, &step)
    }

    private func advanceTLS(_ tls: TLSEngine, _ step: inout LoadStep) {
        if phase == .handshaking {
            let result = tls.handshake()
            if tls.hasOutput { step.send(tls.takeOutput()) }
            switch result {
            case .needsMoreInput:
                return
            case .failed(let error):
                fail(.tls(error), &step)
                return
            case .complete:
                phase = .ready
            }
        }
        // Drains every record fed (post-handshake messages such as session tickets are consumed inside OpenSSL).
        var readFailure: TLSError?
        reading: while true {
            switch tls.read() {
            case .data(let plaintext):
                parser.receive(plaintext)
            case .needsMoreInput:
                break reading
            case .closed, .failed(.closedByPeer):
                // close_notify, or the end of input without it: the parser decides whether a response was cut short.
                parser.receiveEOF()
                break reading
            case .failed(let error):
                readFailure = error
                break reading
            }
        }
        if tls.hasOutput { step.send(tls.takeOutput()) }
        // What arrived before a failure may still complete the response under way.
        advanceHTTP(&step)
        if let readFailure { fail(.tls(readFailure), &step) }
    }

    // MARK: - HTTP

    private func advanceHTTP(_ step: inout LoadStep) {
        while true {
            if case .failed = phase { return }
            let event: HTTP1Event
            do {
                event = try parser.nextEvent()
            } catch {
                fail(.http(error), &step)
                return
            }
            switch event {
            case .responseHead(let head):
                if phase == .tunnelling {
                    guard (200..<300).contains(head.status) else {
                        fail(.tunnelRefused(status: head.status), &step)
                        return
                    }
                } else if !head.isInterim {
                    status = head.status
                }
            case .body(let piece):
                bodyBytes += piece.count
            case .end:
                step.completed = CompletedResponse(status: status, bodyBytes: bodyBytes)
                phase = .ready
                guard parser.lastMessageKeepAlive else {
                    fail(.notKeepAlive, &step)
                    return
                }
                do {
                    // From here on, any byte before the next request is "response bytes with no request outstanding".
                    try parser.startNextMessage()
                } catch {
                    fail(.http(error), &step)
                    return
                }
            case .switchedProtocols(let leftover):
                guard phase == .tunnelling else {
                    fail(.http(HTTP1Error(.remote, .unexpectedData, status: 502, detail: "protocol switch")), &step)
                    return
                }
                parser = HTTP1Parser(role: .responses)
                if recipe.tls != nil {
                    startTLS(leftover: leftover, &step)
                } else {
                    phase = .ready
                    if !leftover.isEmpty { parser.receive(leftover) }
                }
                return
            case .connectionClosed:
                fail(.closedByServer, &step)
                return
            case .needMoreData, .paused, .requestHead:
                // A responses-role parser never reports a request head.
                return
            }
        }
    }

    private func fail(_ failure: LoadFailure, _ step: inout LoadStep) {
        if case .failed = phase { return }
        phase = .failed(failure)
        step.failure = failure
    }
}

@available(*, unavailable, message: "A LoadConnection is confined to the loop thread that drives its socket.")
extension LoadConnection: Sendable {}
