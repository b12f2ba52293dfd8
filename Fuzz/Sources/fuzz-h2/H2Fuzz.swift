import FuzzSupport
import HTTP2Core

// Input: [role/options] [chunking] frames. Server role: the frames follow the client preface (added here, so the
// fuzzer spends no time rediscovering it), and every request opened gets a response with a body larger than a
// the default window, so flow control, RST_STREAM and GOAWAY race our own output. Client role: a POST is submitted first,
// and the frames are the server's answer. Bytes the session wants to write are taken after every read.

private let clientPreface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
private let body = [UInt8](repeating: 0x61, count: 3_000)

/// One input; see above.
func fuzzH2(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    let options = input.control()
    let selector = input.control()
    let role: H2Role = options & 1 == 0 ? .server : .client
    // A small receive window of ours: the peer's DATA overruns it unless it obeys flow control.
    let settings = options & 2 == 0 ? H2Settings() : H2Settings(initialWindowSize: 100, maxFrameSize: 16_384)
    let session: H2Session
    do {
        session = try H2Session(role: role, settings: settings)
    } catch {
        invariant(false, "a session with valid settings was refused: \(error)")
        return 0
    }
    var stream = input.payload
    if role == .server {
        stream = clientPreface + stream
    } else {
        do {
            let id = try session.submitRequest(
                [
                    H2Header(":method", "POST"), H2Header(":scheme", "https"), H2Header(":authority", "good.test"),
                    H2Header(":path", "/up"),
                ], body: .streaming)
            try session.sendData(streamID: id, body, endStream: options & 4 == 0)
        } catch {
            invariant(false, "a fresh client session refused a request: \(error)")
        }
    }
    _ = session.pendingOutput()
    for read in reads(of: stream, selector: selector) {
        let events: [H2Event]
        do {
            events = try session.receive(read)
        } catch {
            // A connection error: the session has queued its GOAWAY and is over.
            _ = session.pendingOutput()
            return 0
        }
        for event in events { answer(event, on: session, trailers: options & 8 != 0) }
        _ = session.pendingOutput()
    }
    return 0
}

/// Reacts as the proxy's relays do: requests get a streamed response, received bodies are consumed.
private func answer(_ event: H2Event, on session: H2Session, trailers: Bool) {
    switch event {
    case .headers(let id, _, .request, _):
        do {
            try session.submitResponse(streamID: id, headers: [H2Header(":status", "200")], body: .streaming)
            try session.sendData(streamID: id, body, endStream: !trailers)
            if trailers { try session.submitTrailers(streamID: id, [H2Header("x-done", "1")]) }
        } catch {
            // The stream may already be reset or refused by the time we answer: the session says so, and goes on.
        }
    case .data(let id, let bytes, _):
        session.consume(streamID: id, count: bytes.count)
    default:
        break
    }
}
