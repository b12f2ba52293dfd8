import CZlib
import Inflate

/// zlib's deflate over a whole buffer: the encoder matching `Inflate`, for re-encoding a rewritten gzip or deflate
/// body in the format it came in.
enum Deflate {
    /// `input` compressed at zlib's default level in `format` (gzip with a zero mtime, as `gzip -n` writes).
    static func deflate(_ input: [UInt8], format: Inflate.Format) -> [UInt8]? {
        let windowBits: Int32 =
            switch format {
            case .raw: -MAX_WBITS
            case .zlib: MAX_WBITS
            case .gzip: MAX_WBITS + 16
            }
        var stream = z_stream()
        guard
            deflateInit2_(
                &stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, windowBits, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                Int32(MemoryLayout<z_stream>.size)) == Z_OK
        else { return nil }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(input.count))))
        var input = input
        let status = input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                stream.next_in = inBuffer.baseAddress
                stream.avail_in = UInt32(inBuffer.count)
                stream.next_out = outBuffer.baseAddress
                stream.avail_out = UInt32(outBuffer.count)
                // deflateBound guarantees one call with Z_FINISH suffices.
                return CZlib.deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { return nil }
        output.removeSubrange(Int(stream.total_out)...)
        return output
    }
}
