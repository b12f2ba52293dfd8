import FuzzSupport
import HTTP1Core

// Input: [role/method] [chunking] payload. The payload is a request stream (to the requests parser) or a response
// stream (to the responses parser, told the request method first), fed in reads, then EOF. Every parsed head must
// serialise and parse back to itself, since the proxy forwards serialised heads (with its own version, HTTP/1.1, for
// a peer's HTTP/1.2 and above, as RFC 9110 §6.2 asks of an intermediary).

private let methods = ["GET", "HEAD", "CONNECT", "POST"]

/// One input; see above.
func fuzzHTTP1(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    let choice = input.control()
    let selector = input.control()
    let role: HTTP1Parser.Role = choice & 1 == 0 ? .requests : .responses
    let method = methods[Int(choice >> 1) % methods.count]
    var parser = HTTP1Parser(role: role)
    if role == .responses { parser.expectResponse(toRequestMethod: method) }

    for read in reads(of: input.payload, selector: selector) {
        parser.receive(Array(read))
        guard drain(&parser, method: method, upgrade: choice & 0x40 != 0) else { return 0 }
    }
    parser.receiveEOF()
    _ = drain(&parser, method: method, upgrade: choice & 0x40 != 0)
    return 0
}

/// Takes events until the parser needs more data; false once the stream is over (error, close, protocol switch).
private func drain(_ parser: inout HTTP1Parser, method: String, upgrade: Bool) -> Bool {
    for _ in 0..<10_000 {
        let event: HTTP1Event
        do {
            event = try parser.nextEvent()
        } catch {
            return false
        }
        switch event {
        case .requestHead(let head): checkRoundTrip(head)
        case .responseHead(let head): checkRoundTrip(head, method: method)
        case .body, .end: continue
        case .needMoreData: return true
        case .connectionClosed, .switchedProtocols: return false
        case .paused:
            do {
                if upgrade, parser.role == .requests {
                    _ = try parser.switchProtocols()
                } else {
                    try parser.startNextMessage()
                    if parser.role == .responses { parser.expectResponse(toRequestMethod: method) }
                }
            } catch {
                // Not an upgradable request, or a message that closes the connection: the stream ends here.
                return false
            }
        }
    }
    invariant(false, "the parser produced 10,000 events from one read without asking for more data")
    return false
}

/// The head as the serialiser writes it: HTTP/1.x above 1.1 goes out as HTTP/1.1.
private func forwarded(_ version: HTTPVersion) -> HTTPVersion {
    version.minor > 1 ? .http1_1 : version
}

/// The line form a capture stores (`appendLines`) is the same whether it is copied from the wire in one piece (when
/// the head is already in that form) or written field by field.
private func checkLineForm(_ headers: HTTPHeaders) {
    var parsed: [UInt8] = []
    headers.appendLines(to: &parsed)
    var built: [UInt8] = []
    HTTPHeaders(headers.fields.map { ($0.name, $0.value) }).appendLines(to: &built)
    invariant(parsed == built, "line form differs: \(parsed) from the wire, \(built) field by field")
}

private func checkRoundTrip(_ head: HTTPRequestHead) {
    checkLineForm(head.headers)
    var wire: [UInt8] = []
    do {
        try HTTP1Serializer.write(head, into: &wire)
    } catch {
        invariant(false, "a parsed request head does not serialise: \(error)")
    }
    var again = HTTP1Parser(role: .requests)
    again.receive(wire)
    let reparsed: HTTP1Event
    do {
        reparsed = try again.nextEvent()
    } catch {
        invariant(false, "a serialised request head does not parse: \(error)")
        return
    }
    var expected = head
    expected.version = forwarded(head.version)
    invariant(reparsed == .requestHead(expected), "request head changed in a round trip: \(head) → \(reparsed)")
}

private func checkRoundTrip(_ head: HTTPResponseHead, method: String) {
    checkLineForm(head.headers)
    var wire: [UInt8] = []
    do {
        try HTTP1Serializer.write(head, into: &wire)
    } catch {
        invariant(false, "a parsed response head does not serialise: \(error)")
    }
    var again = HTTP1Parser(role: .responses)
    again.expectResponse(toRequestMethod: method)
    again.receive(wire)
    let reparsed: HTTP1Event
    do {
        reparsed = try again.nextEvent()
    } catch {
        invariant(false, "a serialised response head does not parse: \(error)")
        return
    }
    var expected = head
    expected.version = forwarded(head.version)
    invariant(reparsed == .responseHead(expected), "response head changed in a round trip: \(head) → \(reparsed)")
}
