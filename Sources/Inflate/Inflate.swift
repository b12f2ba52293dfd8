import CZlib

/// zlib's inflate over a whole buffer, bounded: the one decompressor of the package (an `.ipa`'s deflated
/// `Info.plist`, a captured body's `Content-Encoding: gzip` or `deflate`).
///
/// zlib is handed exactly the given bytes. A stream that needs more than that fails as `truncated`, where an
/// inflate loop that asks a reader for more input would spin at the end of the data; output past `limit` fails as
/// `tooLarge` (a compression bomb); for the zlib and gzip formats, zlib checks the trailer (Adler-32, or CRC-32 and
/// length), so only a stream that decodes whole and matches its checksum is returned.
public enum Inflate {
    /// The framing around the deflate data.
    public enum Format: Sendable {
        /// Bare deflate (RFC 1951), as a ZIP member stores it.
        case raw
        /// zlib (RFC 1950): HTTP's `Content-Encoding: deflate`.
        case zlib
        /// gzip (RFC 1952): HTTP's `Content-Encoding: gzip`; a single member.
        case gzip

        var windowBits: Int32 {
            switch self {
            case .raw: -MAX_WBITS
            case .zlib: MAX_WBITS
            case .gzip: MAX_WBITS + 16
            }
        }
    }

    /// Why the data did not inflate.
    public enum Failure: Error, Equatable, Sendable {
        /// Every byte was used and the stream has not ended.
        case truncated
        /// The data is not a valid stream of the format, or its checksum does not match.
        case corrupt
        /// The output would pass the caller's limit.
        case tooLarge
    }

    /// The inflated bytes of `input`, at most `limit` of them.
    public static func inflate(_ input: [UInt8], format: Format, limit: Int) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        guard inflateInit2_(&stream, format.windowBits, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            throw .corrupt
        }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        let outcome: Failure? = input.withUnsafeBufferPointer { input in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.avail_in = UInt32(input.count)
            while true {
                let (status, produced) = buffer.withUnsafeMutableBufferPointer { out in
                    stream.next_out = out.baseAddress
                    stream.avail_out = UInt32(out.count)
                    let status = CZlib.inflate(&stream, Z_NO_FLUSH)
                    return (status, out.count - Int(stream.avail_out))
                }
                guard output.count + produced <= limit else { return .tooLarge }
                output.append(contentsOf: buffer[0..<produced])
                switch status {
                case Z_STREAM_END: return nil
                case Z_OK: continue
                // No progress possible: every input byte is used and the stream has not ended.
                case Z_BUF_ERROR: return .truncated
                default: return .corrupt
                }
            }
        }
        if let outcome { throw outcome }
        return output
    }
}
