import HTTP1Core

/// The observable outcome of feeding bytes to a parser: events (bodies merged, needMoreData/paused dropped) and the
/// error that stopped it, if any.
struct ParseOutcome: Equatable, CustomStringConvertible {
    var events: [HTTP1Event] = []
    var error: HTTP1Error?

    var description: String { "events: \(events), error: \(String(describing: error))" }

    mutating func record(_ event: HTTP1Event) {
        if case .body(let more) = event, case .body(let previous)? = events.last {
            events[events.count - 1] = .body(previous + more)
        } else if case .switchedProtocols(let more) = event, case .switchedProtocols(let previous)? = events.last {
            events[events.count - 1] = .switchedProtocols(leftover: previous + more)
        } else {
            events.append(event)
        }
    }
}

/// Feeds `chunks` one after another, draining events after each, then the EOF if asked. On `.paused` it continues
/// with the next message when the last one allowed keep-alive, like a server that answered instantly.
func parse(
    _ chunks: [[UInt8]], role: HTTP1Parser.Role, methods: [String] = [], eof: Bool = false,
    limits: HTTP1Limits = .init()
) -> ParseOutcome {
    var parser = HTTP1Parser(role: role, limits: limits)
    for method in methods { parser.expectResponse(toRequestMethod: method) }
    var outcome = ParseOutcome()
    func drain() -> Bool {
        // Bounded: every message needs at least one byte, so more iterations than bytes would be a parser bug.
        for _ in 0..<100_000 {
            do {
                let event = try parser.nextEvent()
                switch event {
                case .needMoreData:
                    return true
                case .paused:
                    guard parser.lastMessageKeepAlive, parser.bufferedByteCount > 0 || eof else { return true }
                    try parser.startNextMessage()
                case .connectionClosed:
                    outcome.record(event)
                    return false
                case .switchedProtocols:
                    outcome.record(event)
                    return true
                default:
                    outcome.record(event)
                }
            } catch {
                outcome.error = error
                return false
            }
        }
        outcome.error = HTTP1Error(.local, .invalidState, status: 0, detail: "harness: parser did not settle")
        return false
    }
    for chunk in chunks {
        parser.receive(chunk)
        guard drain() else { return outcome }
    }
    if eof {
        parser.receiveEOF()
        _ = drain()
    }
    return outcome
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// Every way of splitting `data` in two, plus byte-at-a-time delivery.
func splits(of data: [UInt8]) -> [[[UInt8]]] {
    var result = (0...data.count).map { [Array(data[..<$0]), Array(data[$0...])] }
    result.append(data.map { [$0] })
    return result
}
