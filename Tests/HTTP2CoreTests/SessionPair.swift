import HTTP2Core
import Testing

/// A client and a server session joined in memory: what one writes, the other reads. No sockets.
final class SessionPair {
    let client: H2Session
    let server: H2Session
    /// Every event each side reported, in order.
    var clientEvents: [H2Event] = []
    var serverEvents: [H2Event] = []
    /// Called for each event as it arrives, to let a test react (respond, echo, reset …).
    var onServerEvent: (H2Event) throws -> Void = { _ in }
    var onClientEvent: (H2Event) throws -> Void = { _ in }
    /// When true, received DATA is consumed at once; tests of backpressure switch it off.
    var clientConsumesImmediately = true
    var serverConsumesImmediately = true

    init(client: H2Settings = H2Settings(), server: H2Settings = H2Settings()) throws {
        self.client = try H2Session(role: .client, settings: client)
        self.server = try H2Session(role: .server, settings: server)
    }

    /// Shuttles bytes both ways until neither side has anything to write; returns false if it did not settle
    /// within `maxRounds`.
    @discardableResult
    func exchange(maxRounds: Int = 100_000) throws -> Bool {
        for _ in 0..<maxRounds {
            let fromClient = client.pendingOutput()
            try deliver(client.takeEvents(), toClient: true)
            let fromServer = server.pendingOutput()
            try deliver(server.takeEvents(), toClient: false)
            if fromClient.isEmpty && fromServer.isEmpty { return true }
            if !fromClient.isEmpty { try deliver(server.receive(fromClient), toClient: false) }
            if !fromServer.isEmpty { try deliver(client.receive(fromServer), toClient: true) }
        }
        return false
    }

    private func deliver(_ events: [H2Event], toClient: Bool) throws {
        for event in events {
            if toClient {
                clientEvents.append(event)
                if clientConsumesImmediately, case .data(let id, let bytes, _) = event {
                    client.consume(streamID: id, count: bytes.count)
                }
                try onClientEvent(event)
            } else {
                serverEvents.append(event)
                if serverConsumesImmediately, case .data(let id, let bytes, _) = event {
                    server.consume(streamID: id, count: bytes.count)
                }
                try onServerEvent(event)
            }
        }
    }
}

/// Collected view of one stream's events.
struct StreamRecord {
    var heads: [(fields: [H2Header], category: H2HeadersCategory, endStream: Bool)] = []
    var body: [UInt8] = []
    var ended = false
    var closedWith: H2ErrorCode?
    var resetWith: H2ErrorCode?
}

extension Array where Element == H2Event {
    /// Groups events by stream.
    func streams() -> [Int32: StreamRecord] {
        var result: [Int32: StreamRecord] = [:]
        for event in self {
            switch event {
            case .headers(let id, let fields, let category, let endStream):
                result[id, default: StreamRecord()].heads.append((fields, category, endStream))
                if endStream { result[id, default: StreamRecord()].ended = true }
            case .data(let id, let bytes, let endStream):
                result[id, default: StreamRecord()].body.append(contentsOf: bytes)
                if endStream { result[id, default: StreamRecord()].ended = true }
            case .streamClosed(let id, let code):
                result[id, default: StreamRecord()].closedWith = code
            case .rstStream(let id, let code):
                result[id, default: StreamRecord()].resetWith = code
            default:
                break
            }
        }
        return result
    }
}

/// FNV-1a 64-bit: a cheap checksum to compare large bodies.
func checksum(_ bytes: [UInt8]) -> UInt64 {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in bytes {
        hash ^= UInt64(byte)
        hash = hash &* 0x100_0000_01b3
    }
    return hash
}

/// Deterministic pseudo-random bytes (xorshift), so a body's content depends on its stream and position.
func patternBytes(count: Int, seed: UInt64) -> [UInt8] {
    var state = seed | 1
    var out = [UInt8]()
    out.reserveCapacity(count)
    for _ in 0..<count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        out.append(UInt8(truncatingIfNeeded: state))
    }
    return out
}

/// A plain request head for tests.
func requestHeaders(method: String = "GET", path: String = "/", extra: [H2Header] = []) -> [H2Header] {
    [H2Header(":method", method), H2Header(":scheme", "https"), H2Header(":authority", "example.test"),
     H2Header(":path", path)] + extra
}

/// Frames in a byte stream written by a session (client output starts with the 24-byte preface).
struct RawFrame {
    var type: UInt8
    var flags: UInt8
    var streamID: UInt32
    var payload: [UInt8]

    static func parse(_ bytes: [UInt8], skipPreface: Bool) -> [RawFrame] {
        var index = skipPreface ? 24 : 0
        var frames: [RawFrame] = []
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            let streamID =
                (UInt32(bytes[index + 5]) << 24 | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 8
                    | UInt32(bytes[index + 8])) & 0x7fff_ffff
            guard index + 9 + length <= bytes.count else { break }
            frames.append(
                RawFrame(
                    type: bytes[index + 3], flags: bytes[index + 4], streamID: streamID,
                    payload: Array(bytes[(index + 9)..<(index + 9 + length)])))
            index += 9 + length
        }
        return frames
    }

    /// The error code of a GOAWAY frame.
    var goAwayCode: UInt32? {
        guard type == 7, payload.count >= 8 else { return nil }
        return UInt32(payload[4]) << 24 | UInt32(payload[5]) << 16 | UInt32(payload[6]) << 8 | UInt32(payload[7])
    }
}

/// The 24-byte client connection preface.
let clientPreface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

/// A raw frame header + payload.
func frame(type: UInt8, flags: UInt8 = 0, streamID: UInt32 = 0, length: Int? = nil, payload: [UInt8] = []) -> [UInt8] {
    let n = length ?? payload.count
    return [UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff), type, flags,
            UInt8(streamID >> 24 & 0x7f), UInt8(streamID >> 16 & 0xff), UInt8(streamID >> 8 & 0xff),
            UInt8(streamID & 0xff)] + payload
}

/// Length + checksum of a body: compares large bodies with a short failure message.
struct BodyDigest: Equatable, CustomStringConvertible {
    var count: Int
    var checksum: UInt64
    init(_ bytes: [UInt8]?) {
        count = bytes?.count ?? -1
        checksum = bytes.map(HTTP2CoreTests.checksum) ?? 0
    }
    var description: String { "\(count) bytes, fnv1a \(String(checksum, radix: 16))" }
}
