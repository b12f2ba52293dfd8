/// Why bytes are not the TLS hello a parser expected.
public struct TLSHelloError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Kind: Hashable, Sendable {
        /// The first bytes are not a TLS handshake record (plain HTTP, SSH, garbage…).
        case notTLS
        /// A TLS handshake record, but not the hello expected (a ServerHello where a ClientHello should be…).
        case unexpectedMessage
        /// A hello whose lengths or fields do not add up.
        case malformed
        /// The hello is larger than the parser accepts.
        case tooLarge
    }

    public let kind: Kind
    public let detail: String

    public var description: String { "\(kind): \(detail)" }
}

/// The first handshake message of a connection, reassembled from the handshake records that carry it (a hello
/// may span several records, or arrive byte by byte). Pure Swift; never reads out of bounds.
enum HandshakeRecords {
    /// The body of the first handshake message if it is complete in `data`, with the first record's version and
    /// the record bytes it took; nil while incomplete. Throws when `data` cannot start with a message of `type`.
    static func firstMessage(_ data: [UInt8], type: UInt8, name: String, maximumLength: Int) throws(TLSHelloError)
        -> (body: [UInt8], recordVersion: UInt16, consumed: Int)?
    {
        guard let first = data.first else { return nil }
        guard first == 0x16 else {
            throw TLSHelloError(kind: .notTLS, detail: "first byte 0x\(hex(first)) is not a handshake record")
        }
        if data.count >= 2, data[1] != 0x03 {
            throw TLSHelloError(kind: .notTLS, detail: "record version major \(data[1]) is not 3")
        }
        // First a walk over the record headers that copies nothing: a hello that arrives a byte at a time is parsed
        // again on every read, and copying the records done so far each time would make it quadratic.
        var header: [UInt8] = []  // the message's first four bytes (type and length), which may span records
        var available = 0
        var offset = 0
        var recordVersion: UInt16 = 0
        var needed: Int?
        // Each iteration consumes a whole record of at least 5 bytes, so this is bounded by data.count / 5 + 1.
        while offset < data.count {
            guard data.count - offset >= 5 else { return nil }
            guard data[offset] == 0x16 else {
                throw TLSHelloError(kind: .malformed, detail: "record type \(data[offset]) inside the \(name)")
            }
            if offset == 0 { recordVersion = UInt16(data[1]) << 8 | UInt16(data[2]) }
            let length = Int(data[offset + 3]) << 8 | Int(data[offset + 4])
            guard length > 0, length <= 16_384 + 2048 else {
                throw TLSHelloError(kind: .malformed, detail: "record length \(length)")
            }
            guard data.count - offset - 5 >= length else { return nil }
            let payload = (offset + 5)..<(offset + 5 + length)
            if header.count < 4 { header += data[payload].prefix(4 - header.count) }
            available += length
            offset = payload.upperBound
            if needed == nil, header.count == 4 {
                guard header[0] == type else {
                    throw TLSHelloError(kind: .unexpectedMessage, detail: "handshake type \(header[0]), not a \(name)")
                }
                let bodyLength = Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
                guard bodyLength <= maximumLength else {
                    throw TLSHelloError(kind: .tooLarge, detail: "\(name) of \(bodyLength) bytes")
                }
                needed = 4 + bodyLength
            }
            if let needed, available >= needed {
                return (body(of: data, records: 0..<offset, bytes: 4..<needed), recordVersion, offset)
            }
        }
        // A first record shorter than 4 handshake bytes can still be followed by more records.
        if let firstType = header.first, firstType != type {
            throw TLSHelloError(kind: .unexpectedMessage, detail: "handshake type \(firstType), not a \(name)")
        }
        return nil
    }

    /// The bytes at `range` of the handshake stream carried by the (already checked) records in `records`.
    private static func body(of data: [UInt8], records: Range<Int>, bytes range: Range<Int>) -> [UInt8] {
        var stream: [UInt8] = []
        stream.reserveCapacity(range.upperBound)
        var offset = records.lowerBound
        while offset < records.upperBound, stream.count < range.upperBound {
            let length = Int(data[offset + 3]) << 8 | Int(data[offset + 4])
            stream += data[(offset + 5)..<(offset + 5 + length)]
            offset += 5 + length
        }
        return Array(stream[range])
    }

    static func hex(_ b: UInt8) -> String {
        let s = String(b, radix: 16)
        return s.count == 1 ? "0" + s : s
    }
}

/// A bounds-checked reader over a byte array: every read checks the remaining length first.
struct ByteCursor {
    private let bytes: [UInt8]
    private var index: Int
    private let end: Int

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.index = 0
        self.end = bytes.count
    }

    private init(bytes: [UInt8], index: Int, end: Int) {
        self.bytes = bytes
        self.index = index
        self.end = end
    }

    var isAtEnd: Bool { index >= end }
    var remaining: Int { end - index }
    var rest: ArraySlice<UInt8> { bytes[index..<end] }

    private func truncated(_ what: String, _ need: Int) -> TLSHelloError {
        TLSHelloError(kind: .malformed, detail: "\(what): needs \(need) bytes, \(remaining) left")
    }

    mutating func u8(_ what: String) throws(TLSHelloError) -> UInt8 {
        guard remaining >= 1 else { throw truncated(what, 1) }
        defer { index += 1 }
        return bytes[index]
    }

    mutating func u16(_ what: String) throws(TLSHelloError) -> UInt16 {
        guard remaining >= 2 else { throw truncated(what, 2) }
        defer { index += 2 }
        return UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1])
    }

    mutating func skip(_ count: Int, _ what: String) throws(TLSHelloError) {
        guard count >= 0, remaining >= count else { throw truncated(what, count) }
        index += count
    }

    /// A cursor over the next `count` bytes; this cursor moves past them.
    mutating func sub(_ count: Int, _ what: String) throws(TLSHelloError) -> ByteCursor {
        guard count >= 0, remaining >= count else { throw truncated(what, count) }
        defer { index += count }
        return ByteCursor(bytes: bytes, index: index, end: index + count)
    }
}
