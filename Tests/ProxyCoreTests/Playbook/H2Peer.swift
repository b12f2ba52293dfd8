import HTTP2Core

/// HTTP/2 spoken over a playbook's in-memory TLS peer (the app's client or an origin): nghttp2 (`H2Session`) writes
/// the frames a playbook feeds with `From.clientSends` or `.originSends`, and reads what the peer
/// decrypted from the session's sends.
final class H2Peer {
    let session: H2Session
    /// How much of the TLS peer's plaintext was read.
    private var read = 0
    /// Each stream's response or request as read so far.
    private(set) var messages: [Int32: Message] = [:]

    struct Message: Equatable {
        var fields: [H2Header] = []
        var body: [UInt8] = []
        var ended = false
        var reset: H2ErrorCode?
        var status: String? { fields.first(named: ":status") }
        var path: String? { fields.first(named: ":path") }
        var bodyText: String { String(decoding: body, as: UTF8.self) }
    }

    init(_ role: H2Role) throws {
        session = try H2Session(role: role)
    }

    /// The frames pending: the preface and SETTINGS first, then whatever was submitted or answered since.
    func output() -> [UInt8] { session.pendingOutput() }

    /// A GET on a new stream (client role); returns its stream.
    @discardableResult
    func get(_ path: String, authority: String = "good.test", extra: [H2Header] = []) throws -> Int32 {
        try session.submitRequest(
            [H2Header(":method", "GET"), H2Header(":scheme", "https"), H2Header(":authority", authority),
             H2Header(":path", path)] + extra, body: .none)
    }

    /// A complete response with `body` on `stream` (server role).
    func respond(_ stream: Int32, status: Int = 200, body: String) throws {
        let bytes = Array(body.utf8)
        try session.submitResponse(
            streamID: stream, headers: [H2Header(":status", "\(status)"), H2Header("content-length", "\(bytes.count)")],
            body: .streaming)
        try session.sendData(streamID: stream, bytes, endStream: true)
    }

    /// Reads what `peer` decrypted since the last call; returns its events (also gathered in `messages`).
    @discardableResult
    func receive(from peer: TLSPeer?) throws -> [H2Event] {
        guard let peer, peer.received.count > read else { return [] }
        let events = try session.receive(peer.received[read...])
        read = peer.received.count
        for event in events {
            switch event {
            case .headers(let id, let fields, _, let end):
                messages[id, default: Message()].fields += fields
                if end { messages[id]?.ended = true }
            case .data(let id, let bytes, let end):
                messages[id, default: Message()].body += bytes
                session.consume(streamID: id, count: bytes.count)
                if end { messages[id]?.ended = true }
            case .rstStream(let id, let code):
                messages[id, default: Message()].reset = code
            default:
                break
            }
        }
        return events
    }
}
