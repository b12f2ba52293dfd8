import Foundation
import ZIPFoundation

/// Undoes a response's `Content-Encoding` for HAR's `content.text`, which the spec wants decoded. Captures keep
/// bodies as they passed (gzip stays gzip); `gzip` and `deflate` are inflated here with zlib (through ZIPFoundation's
/// raw-deflate decoder). Anything else (`br`, a cut body, damaged data, a result past `limit`) is not decoded, and
/// the caller says so.
enum ContentDecoding {
    /// Decoded bodies larger than this are not decoded (a compression bomb would otherwise fill memory).
    static let limit = 64 << 20

    struct TooLarge: Error {}

    /// The decoded bytes, or nil when `coding` is not one this knows or the data does not decode.
    static func decode(_ bytes: [UInt8], coding: String) -> [UInt8]? {
        let raw: ArraySlice<UInt8>?
        switch coding.lowercased() {
        case "gzip", "x-gzip": raw = gzipPayload(bytes)
        case "deflate":
            // RFC 9110's deflate is the zlib format (2-byte header); some servers send raw deflate.
            if bytes.count >= 2, bytes[0] & 0x0F == 8, (UInt16(bytes[0]) << 8 | UInt16(bytes[1])) % 31 == 0 {
                raw = bytes.dropFirst(2)
            } else {
                raw = bytes[...]
            }
        default: raw = nil
        }
        guard let raw else { return nil }
        let input = Data(raw)
        var output = Data()
        do {
            _ = try Data.decompress(
                size: Int64(input.count), bufferSize: 64 * 1024, skipCRC32: true,
                provider: { position, size in
                    input.subdata(in: Int(position)..<min(input.count, Int(position) + size))
                },
                consumer: { chunk in
                    output.append(chunk)
                    if output.count > limit { throw TooLarge() }
                })
        } catch {
            return nil
        }
        return Array(output)
    }

    /// The deflate stream inside a gzip member (RFC 1952), after its header; nil when the header is not gzip's.
    static func gzipPayload(_ bytes: [UInt8]) -> ArraySlice<UInt8>? {
        guard bytes.count >= 18, bytes[0] == 0x1F, bytes[1] == 0x8B, bytes[2] == 8 else { return nil }
        let flags = bytes[3]
        var i = 10
        if flags & 0x04 != 0 {  // FEXTRA
            guard i + 2 <= bytes.count else { return nil }
            i += 2 + (Int(bytes[i]) | (Int(bytes[i + 1]) << 8))
        }
        for flag: UInt8 in [0x08, 0x10] where flags & flag != 0 {  // FNAME, FCOMMENT: zero-terminated
            while i < bytes.count, bytes[i] != 0 { i += 1 }
            i += 1
        }
        if flags & 0x02 != 0 { i += 2 }  // FHCRC
        // The member ends with CRC32 and ISIZE (8 bytes).
        guard i < bytes.count - 8 else { return nil }
        return bytes[i..<(bytes.count - 8)]
    }
}
