import Foundation
import ProxyTrace

/// Trace records stored several to a row (`trace_chunks.records`): a connection's records of one written batch, as
/// a JSON array with one array per record, `[time, level, "title", "subject", ["key", "value",
/// …]]`, and a sixth element, the fields' levels (`[1, 2, …]`), when a field has another level than 1. A keep-alive request makes about four
/// records; a row each (the first development builds' `trace_records`) made them most of a capture's cost. The JSON is written by hand into bytes, readable in `sqlite3`.
enum TraceChunk {
    /// Appends one record to a chunk's bytes (`[` opens the chunk on its first record; `close` ends it).
    static func append(_ record: DiagnosticsRecord, time: Double, to out: inout [UInt8]) {
        out.append(out.isEmpty ? UInt8(ascii: "[") : UInt8(ascii: ","))
        appendElement(record, time: time, to: &out)
    }

    /// Appends a chunk's bytes that have been made by `appendElement` (`[` opens the chunk on its first; `close` ends
    /// it).
    static func append(element: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        out.append(out.isEmpty ? UInt8(ascii: "[") : UInt8(ascii: ","))
        out.append(contentsOf: element)
    }

    /// One record as an element of a chunk: `[time, level, "title", "subject", [fields]]`.
    static func appendElement(_ record: DiagnosticsRecord, time: Double, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "["))
        out.append(contentsOf: String(time).utf8)
        out.append(UInt8(ascii: ","))
        out.append(contentsOf: String(record.level).utf8)
        out.append(UInt8(ascii: ","))
        appendString(record.title, to: &out)
        out.append(UInt8(ascii: ","))
        appendString(record.subject, to: &out)
        out.append(contentsOf: ",[".utf8)
        for (i, field) in record.fields.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            appendString(field.key, to: &out)
            out.append(UInt8(ascii: ","))
            appendString(field.value, to: &out)
        }
        out.append(UInt8(ascii: "]"))
        // The fields' own levels (`--diagnostics 2` adds headers and TLS details), only when one is not 1.
        if record.fields.contains(where: { $0.level != 1 }) {
            out.append(contentsOf: ",[".utf8)
            for (i, field) in record.fields.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                out.append(contentsOf: String(field.level).utf8)
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "]"))
    }

    static func close(_ out: inout [UInt8]) {
        out.append(UInt8(ascii: "]"))
    }

    /// A JSON string literal: `"`, `\` and control characters escaped, everything else (UTF-8 included) as is.
    static func appendString(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { appendString(utf8: $0, to: &out) }
    }

    private static func appendString(utf8: UnsafeBufferPointer<UInt8>, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most text needs no escape: copied in runs between the bytes that do.
        var run = 0
        for i in 0..<utf8.count {
            let byte = utf8[i]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<i]))
            run = i + 1
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
            case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
            case UInt8(ascii: "\n"): out.append(contentsOf: #"\n"#.utf8)
            case UInt8(ascii: "\r"): out.append(contentsOf: #"\r"#.utf8)
            case UInt8(ascii: "\t"): out.append(contentsOf: #"\t"#.utf8)
            default:
                let hex: StaticString = "0123456789abcdef"
                out.append(contentsOf: #"\u00"#.utf8)
                out.append(hex.utf8Start[Int(byte >> 4)])
                out.append(hex.utf8Start[Int(byte & 15)])
            }
        }
        out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[run..<utf8.count]))
        out.append(UInt8(ascii: "\""))
    }

    /// The records of a chunk written by `append`, in order; throws when the text is not one.
    static func decode(_ text: String) throws -> [(time: Double, record: DiagnosticsRecord)] {
        guard let list = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [Any] else {
            throw Malformed()
        }
        return try list.map { item in
            guard let parts = item as? [Any], parts.count == 5 || parts.count == 6,
                let time = (parts[0] as? NSNumber)?.doubleValue, let level = (parts[1] as? NSNumber)?.intValue,
                let title = parts[2] as? String, let subject = parts[3] as? String, let flat = parts[4] as? [String],
                flat.count % 2 == 0
            else { throw Malformed() }
            var levels = [Int](repeating: 1, count: flat.count / 2)
            if parts.count == 6 {
                guard let given = parts[5] as? [NSNumber], given.count == levels.count else { throw Malformed() }
                levels = given.map(\.intValue)
            }
            let fields = levels.indices.map { DiagnosticsRecord.Field(flat[2 * $0], flat[2 * $0 + 1], level: levels[$0]) }
            return (time, DiagnosticsRecord(title: title, subject: subject, fields: fields, level: level))
        }
    }

    struct Malformed: Error, CustomStringConvertible {
        var description: String { "a trace chunk that is not a JSON array of records" }
    }
}
