import ATSPolicy
import Foundation
import ProxyTrace

@testable import ProxyCore

/// One-line renderings of what crosses a session's boundary, for playbook transcripts: printable HTTP as quoted
/// text, TLS as a list of its records (alerts in the clear are named), anything else as a short hex prefix.
enum WireText {
    /// Longest text shown of one send; the rest is counted.
    static let textLimit = 160

    static func bytes(_ b: [UInt8]) -> String {
        if b.isEmpty { return "(no bytes)" }
        if let records = TLSRecords(b) { return records.description }
        if isPrintable(b) { return quoted(b) }
        let hex = b.prefix(16).map { byte in String(byte >> 4, radix: 16) + String(byte & 0xF, radix: 16) }
        return "hex[\(hex.joined(separator: " "))\(b.count > 16 ? " …" : "")] (\(b.count) bytes)"
    }

    /// Text with CR, LF and tab spelled out, cut at `textLimit`.
    static func quoted(_ b: [UInt8]) -> String {
        var text = String(decoding: b.prefix(textLimit), as: UTF8.self)
        text = text.replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n")
            .replacingOccurrences(of: "\t", with: "\\t")
        return "\"\(text)\"" + (b.count > textLimit ? "… (\(b.count) bytes)" : "")
    }

    /// What a TLS peer decrypted: HTTP/2 frames by name, else quoted text.
    static func plaintext(_ b: [UInt8]) -> String {
        h2Frames(b) ?? quoted(b)
    }

    /// The HTTP/2 client preface (RFC 9113 §3.4).
    static let h2Preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)

    /// Whole HTTP/2 frames (after an optional client preface) as one line: `h2[preface, SETTINGS, HEADERS 1
    /// END_STREAM, DATA 1, SETTINGS ACK, WINDOW_UPDATE 0, GOAWAY]`: the type, the stream of a stream's frame, and
    /// the END_STREAM or ACK flag. Nil when the bytes are not whole frames (HTTP/1 text never is: its first bytes
    /// read as a length far beyond what follows).
    static func h2Frames(_ b: [UInt8]) -> String? {
        var parts: [String] = []
        var i = 0
        if b.starts(with: h2Preface) {
            parts.append("preface")
            i = h2Preface.count
        }
        let names = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY",
                     "WINDOW_UPDATE", "CONTINUATION"]
        while i < b.count {
            guard i + 9 <= b.count else { return nil }
            let length = Int(b[i]) << 16 | Int(b[i + 1]) << 8 | Int(b[i + 2])
            let (type, flags) = (Int(b[i + 3]), b[i + 4])
            let stream = (Int(b[i + 5]) & 0x7F) << 24 | Int(b[i + 6]) << 16 | Int(b[i + 7]) << 8 | Int(b[i + 8])
            guard type < names.count, i + 9 + length <= b.count else { return nil }
            var part = names[type]
            if stream != 0 || type == 8 { part += " \(stream)" }
            if (type == 0 || type == 1), flags & 0x1 != 0 { part += " END_STREAM" }
            if (type == 4 || type == 6), flags & 0x1 != 0 { part += " ACK" }
            parts.append(part)
            i += 9 + length
        }
        return parts.isEmpty ? nil : "h2[\(parts.joined(separator: ", "))]"
    }

    /// UTF-8 text with no control characters but CR, LF and tab (HTTP heads and the proxy's answer bodies).
    static func isPrintable(_ b: [UInt8]) -> Bool {
        guard let text = String(bytes: b, encoding: .utf8) else { return false }
        return text.unicodeScalars.allSatisfy { s in
            s.properties.generalCategory != .control || s == "\r" || s == "\n" || s == "\t"
        }
    }

    static func command(_ c: ProxyCommand) -> String {
        switch c {
        case .sendToClient(let b): "sendToClient(\(bytes(b)))"
        case .sendToUpstream(let b): "sendToUpstream(\(bytes(b)))"
        case .sendToLane(let lane, let b): "sendToLane(\(lane), \(bytes(b)))"
        case .log(let log): "log(\(self.log(log)))"
        case .startTimer(let timer, let after): "startTimer(.\(timer), after: \(after))"
        default: "\(c)"
        }
    }

    static func log(_ log: ProxyLog) -> String {
        switch log {
        case .exchange(let e): "exchange: \(e.consoleLine(colour: false))"
        case .notice(let text, let kind): "notice: \(text)" + (kind.map { " [kind: \($0)]" } ?? "")
        case .diagnostics(let r):
            "trace: \(r.title)" + (r.subject == "(null)" ? "" : " (\(r.subject))") + " {"
                + String(r.fields.map { "\($0.key): \($0.value)" }.joined(separator: "; ").prefix(textLimit)) + "}"
        case .event(let e): "event: \(e.kind)"
        }
    }

    static func event(_ e: ProxyEvent) -> String {
        switch e {
        case .clientBytes(let b): "clientBytes(\(bytes(b)))"
        case .upstreamBytes(let b): "upstreamBytes(\(bytes(b)))"
        case .laneBytes(let lane, let b): "laneBytes(\(lane), \(bytes(b)))"
        default: "\(e)"
        }
    }
}

/// The records of a TLS byte stream that starts on a record boundary: content types and lengths, and the alerts
/// and handshake message types readable in the clear. Nil when the bytes are not whole TLS records.
struct TLSRecords: CustomStringConvertible {
    struct Record {
        var type: UInt8
        var payload: ArraySlice<UInt8>
    }

    let records: [Record]

    init?(_ b: [UInt8]) {
        var i = 0
        var found: [Record] = []
        while i < b.count {
            guard i + 5 <= b.count, (20...23).contains(b[i]), b[i + 1] == 3, b[i + 2] <= 4 else { return nil }
            let length = Int(b[i + 3]) << 8 | Int(b[i + 4])
            guard i + 5 + length <= b.count else { return nil }
            found.append(Record(type: b[i], payload: b[(i + 5)..<(i + 5 + length)]))
            i += 5 + length
        }
        records = found
    }

    /// Alerts sent in the clear (before the handshake encrypts): level 2 is fatal.
    var clearAlerts: [(fatal: Bool, alert: TLSAlert)] {
        records.compactMap { r in
            guard r.type == 21, r.payload.count == 2 else { return nil }
            return (r.payload.first == 2, TLSAlert(r.payload.last!))
        }
    }

    var description: String {
        var parts: [String] = []
        // After a change_cipher_spec the handshake is encrypted, whatever its first byte happens to be.
        var encrypted = false
        for r in records {
            let part: String
            switch r.type {
            case 20:
                part = "change_cipher_spec"
                encrypted = true
            case 21 where r.payload.count == 2:
                part = "alert(\(r.payload.first == 2 ? "fatal" : "warning") \(TLSAlert(r.payload.last!).name))"
            case 21: part = "alert(encrypted)"
            case 22: part = "handshake(\(encrypted ? "encrypted" : Self.handshakeName(r.payload.first)))"
            default: part = "application_data"
            }
            // Runs of the same kind fold into one entry with a count.
            if let last = parts.last, last == part || last.hasPrefix(part + " ×") {
                let count = (last.split(separator: "×").last.flatMap { Int($0) } ?? 1) + 1
                parts[parts.count - 1] = part + " ×\(count)"
            } else {
                parts.append(part)
            }
        }
        let total = records.reduce(0) { $0 + 5 + $1.payload.count }
        return "TLS[\(parts.joined(separator: ", "))] (\(total) bytes)"
    }

    /// The first handshake message's type, readable in the clear up to the ServerHello (TLS 1.3 encrypts the rest).
    private static func handshakeName(_ type: UInt8?) -> String {
        switch type {
        case 1: "ClientHello"
        case 2: "ServerHello"
        case 4: "NewSessionTicket"
        case 11: "Certificate"
        case 12: "ServerKeyExchange"
        case 14: "ServerHelloDone"
        case 16: "ClientKeyExchange"
        default: "encrypted"
        }
    }
}
