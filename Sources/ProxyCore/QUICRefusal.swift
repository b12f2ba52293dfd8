import Foundation

// Theory of operation: transparent mode refuses QUIC (UDP 443, HTTP/3) so that apps fall back to TCP, where the proxy
// sees them (URLSession and browsers do when QUIC fails). The gateway's ruleset sends the devices' UDP 443 to the
// proxy's UDP socket; each datagram is read only as far as QUIC's version-independent long header (RFC 8999 §5.1),
// and a client's Initial (a long header of a real version in a datagram of at least 1,200 bytes, RFC 9000 §14.1) is
// answered with a Version Negotiation packet listing only a reserved version: a client that offered a version the
// server does not list abandons the attempt at once (RFC 9000 §6.2) instead of waiting for its timeout. Nothing
// else is answered (no reflection of short or foreign datagrams; the reply is smaller than the datagram). Each
// attempt (a client's new connection ID) is counted; when that client then connects over TCP 443, the console says
// how many attempts it made before falling back (`QUICRefusals`).

/// QUIC's long header, version-independent (RFC 8999 §5.1): what refusing a QUIC attempt needs.
public struct QUICLongHeader: Equatable, Sendable {
    public let version: UInt32
    public let destinationID: [UInt8]
    public let sourceID: [UInt8]

    /// The smallest datagram a client's Initial travels in (RFC 9000 §14.1); shorter ones get no answer.
    public static let minimumInitialDatagram = 1200
    /// The version the refusal lists: reserved for forcing version negotiation (RFC 9000 §15), so never a client's.
    public static let reservedVersion: UInt32 = 0x1A2A_3A4A

    /// The header of `datagram`, or nil when it is no long-header packet or is cut short.
    public init?(datagram: UnsafeRawBufferPointer) {
        var cursor = 0
        func byte() -> UInt8? {
            guard cursor < datagram.count else { return nil }
            defer { cursor += 1 }
            return datagram[cursor]
        }
        func bytes(_ count: Int) -> [UInt8]? {
            guard count <= datagram.count - cursor else { return nil }
            defer { cursor += count }
            return Array(datagram[cursor..<cursor + count])
        }
        guard let first = byte(), first & 0x80 != 0, let version = bytes(4) else { return nil }
        guard let dcidLength = byte(), let dcid = bytes(Int(dcidLength)) else { return nil }
        guard let scidLength = byte(), let scid = bytes(Int(scidLength)) else { return nil }
        self.version = version.reduce(0) { $0 << 8 | UInt32($1) }
        destinationID = dcid
        sourceID = scid
    }

    /// The Version Negotiation packet (RFC 9000 §17.2.1) that refuses this client's attempt: its connection IDs
    /// echoed crosswise, and only the reserved version listed.
    public var versionNegotiation: [UInt8] {
        var packet: [UInt8] = [0x80 | UInt8.random(in: 0...0x7F), 0, 0, 0, 0]
        packet.append(UInt8(sourceID.count))
        packet += sourceID
        packet.append(UInt8(destinationID.count))
        packet += destinationID
        withUnsafeBytes(of: Self.reservedVersion.bigEndian) { packet += $0 }
        return packet
    }

    /// What to answer `datagram` from a device: a Version Negotiation packet for a client's first flight, nil for
    /// anything else (a Version Negotiation packet itself, a short header, a datagram too short for an Initial).
    public static func refusal(of datagram: UnsafeRawBufferPointer) -> (header: QUICLongHeader, reply: [UInt8])? {
        guard datagram.count >= minimumInitialDatagram, let header = QUICLongHeader(datagram: datagram),
            header.version != 0
        else { return nil }
        return (header, header.versionNegotiation)
    }
}

/// QUIC attempts refused, per device: counted for the console's "N QUIC attempts refused; the app fell back to
/// TCP" and the total. Shared by every loop thread.
public final class QUICRefusals: @unchecked Sendable {
    // @unchecked: every field is touched under `lock`.
    private let lock = NSLock()
    private var total = 0
    /// Attempts not yet reported, by client address.
    private var pending: [String: Int] = [:]
    /// Connection IDs already counted (an Initial sent again is the same attempt), forgotten when many.
    private var seen: Set<[UInt8]> = []
    static let seenLimit = 4096

    public init() {}

    /// Counts an attempt from `client` with `connectionID` (the client's destination ID); true when it is the
    /// client's first since its last fallback was reported (worth a notice).
    public func refused(client: String, connectionID: [UInt8]) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if seen.count >= Self.seenLimit { seen.removeAll(keepingCapacity: true) }
        guard seen.insert(Array(client.utf8) + [0] + connectionID).inserted else { return false }
        total += 1
        pending[client, default: 0] += 1
        return pending[client] == 1
    }

    /// `client` connected over TCP 443: the attempts it made since the last report (cleared), nil when none.
    public func fellBack(client: String) -> Int? {
        lock.lock()
        defer { lock.unlock() }
        return pending.removeValue(forKey: client)
    }

    /// Every attempt refused since start.
    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return total
    }
}
