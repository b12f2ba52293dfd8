/// The four WireGuard messages on the wire (the paper §5.4), parsed from a datagram with every length checked
/// first: anything on the UDP port comes from the network, and what does not parse is dropped.
enum WireGuardMessage {
    /// Type 1, 148 bytes: sender index, ephemeral key, encrypted static key, encrypted timestamp, MAC1, MAC2.
    case initiation(Initiation)
    /// Type 2, 92 bytes: sender and receiver indexes, ephemeral key, encrypted nothing, MAC1, MAC2.
    case response(Response)
    /// Type 3, 64 bytes: a cookie reply (only an initiator receives one; this version never sends one).
    case cookieReply
    /// Type 4, 32 bytes or more: receiver index, counter, encrypted packet.
    case transport(Transport)

    static let initiationLength = 148
    static let responseLength = 92
    static let cookieReplyLength = 64
    /// Header and tag: a keepalive, the shortest transport message.
    static let transportMinimum = 32

    struct Initiation {
        var sender: UInt32
        var ephemeral: [UInt8]
        var encryptedStatic: [UInt8]
        var encryptedTimestamp: [UInt8]
        /// The message up to MAC1, and MAC1 itself.
        var macked: ArraySlice<UInt8>
        var mac1: ArraySlice<UInt8>
    }

    struct Response {
        var sender: UInt32
        var receiver: UInt32
        var ephemeral: [UInt8]
        var encryptedNothing: [UInt8]
        var macked: ArraySlice<UInt8>
        var mac1: ArraySlice<UInt8>
    }

    struct Transport {
        var receiver: UInt32
        var counter: UInt64
        var ciphertext: ArraySlice<UInt8>
    }

    /// The message in `bytes`, or nil: a wrong type, reserved bytes not zero, or a length not the type's.
    init?(_ bytes: [UInt8]) {
        guard bytes.count >= 4, bytes[1] == 0, bytes[2] == 0, bytes[3] == 0 else { return nil }
        switch bytes[0] {
        case 1 where bytes.count == Self.initiationLength:
            self = .initiation(
                Initiation(
                    sender: Self.u32(bytes, 4), ephemeral: Array(bytes[8..<40]), encryptedStatic: Array(bytes[40..<88]),
                    encryptedTimestamp: Array(bytes[88..<116]), macked: bytes[0..<116], mac1: bytes[116..<132]))
        case 2 where bytes.count == Self.responseLength:
            self = .response(
                Response(
                    sender: Self.u32(bytes, 4), receiver: Self.u32(bytes, 8), ephemeral: Array(bytes[12..<44]),
                    encryptedNothing: Array(bytes[44..<60]), macked: bytes[0..<60], mac1: bytes[60..<76]))
        case 3 where bytes.count == Self.cookieReplyLength:
            self = .cookieReply
        case 4 where bytes.count >= Self.transportMinimum:
            var counter: UInt64 = 0
            for i in 0..<8 { counter |= UInt64(bytes[8 + i]) << (8 * i) }
            self = .transport(Transport(receiver: Self.u32(bytes, 4), counter: counter, ciphertext: bytes[16...]))
        default:
            return nil
        }
    }

    static func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * $1) }
    }

    static func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
    static func le64(_ value: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
}
