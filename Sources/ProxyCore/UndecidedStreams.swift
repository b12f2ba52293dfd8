import HTTP1Core
import HTTP2Core

// Theory of operation: the request streams of an h2 client (H2Relay, H2ToH1Relay) whose heads wait for the owner's
// decision (`RelayOutput.toDecide`, answered by `ExchangeRelay.resolve`).
//
// - A stream is held from its request HEADERS to the answer; its later frames (DATA, trailers) are kept in order
//   and replayed once it is decided, as if they came then. Held DATA is not credited to the client, so the stream's
//   own flow-control window bounds it (the connection window holds every stream's full window, so the other streams
//   go on).
// - A stream the client resets (or that closes) meanwhile is forgotten, its held DATA credited back to the
//   connection window; an answer for it later is ignored. It is not logged: it never became an exchange.
// - No deadline runs on a held stream: it waits for the proxy, not for either peer.

/// Request streams held for the owner's decision, with the frames that came after their heads.
struct UndecidedStreams {
    struct Stream {
        let fields: [H2Header]
        let head: HTTPRequestHead
        let endStream: Bool
        /// When the head arrived (the session's clock): the exchange's start.
        let arrived: Double
        /// The stream's frames since, in order.
        var held: [H2Event] = []
    }

    private var streams: [Int32: Stream] = [:]

    var isEmpty: Bool { streams.isEmpty }

    /// The highest stream id held, for a GOAWAY that must let these streams finish.
    var highestID: Int32? { streams.keys.max() }

    func contains(_ id: Int32) -> Bool { streams[id] != nil }

    /// Holds a stream whose head was just read; the owner is asked in `output`.
    mutating func hold(
        _ id: Int32, fields: [H2Header], head: HTTPRequestHead, endStream: Bool, at time: Double,
        asking output: inout RelayOutput
    ) {
        streams[id] = Stream(fields: fields, head: head, endStream: endStream, arrived: time)
        output.toDecide.append(DecisionRequest(id: Int(id), head: head))
    }

    /// Keeps `event` when it belongs to a held stream (DATA or trailers); false when it does not. A reset or close
    /// of a held stream forgets the stream, crediting its held DATA to `client`, and is consumed here too.
    mutating func keep(_ event: H2Event, crediting client: H2Session) -> Bool {
        switch event {
        case .data(let id, _, _), .headers(let id, _, .trailers, _):
            guard streams[id] != nil else { return false }
            streams[id]!.held.append(event)
            return true
        case .rstStream(let id, _), .streamClosed(let id, _):
            guard let stream = streams.removeValue(forKey: id) else { return false }
            let uncredited = stream.held.reduce(0) { sum, event in
                if case .data(_, let bytes, _) = event { sum + bytes.count } else { sum }
            }
            if uncredited > 0 { client.consume(streamID: id, count: uncredited) }
            return true
        case .headers, .settings, .windowUpdate, .ping, .goAway:
            return false
        }
    }

    /// The held stream `id`, no longer held; nil when it is not (the answer came too late).
    mutating func take(_ id: Int) -> Stream? {
        guard let id = Int32(exactly: id) else { return nil }
        return streams.removeValue(forKey: id)
    }

    /// Forgets every held stream (the connection ends); returns their ids.
    mutating func removeAll() -> [Int32] {
        let ids = streams.keys.sorted()
        streams = [:]
        return ids
    }
}
