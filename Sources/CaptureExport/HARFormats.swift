import CaptureStore
import Foundation
import ProxyTrace

/// HAR's timings from the exchange's four instants, in milliseconds. `time` is their sum, as the spec requires.
struct Timings {
    var send: Double
    var wait: Double
    var receive: Double

    init(_ t: ExchangeTimings) {
        func ms(_ from: Double, _ to: Double) -> Double { max(0, ((to - from) * 1_000_000).rounded() / 1000) }
        // Each instant clamped between the one before and the end, so no part is negative.
        let ended = max(t.ended, t.started)
        let sent = min(max(t.requestSent ?? t.started, t.started), ended)
        let first = min(max(t.firstResponseByte ?? ended, sent), ended)
        send = ms(t.started, sent)
        wait = ms(sent, first)
        receive = ms(first, ended)
    }

    var total: Double { ((send + wait + receive) * 1000).rounded() / 1000 }

    var value: HARValue {
        .object([
            HARMember("blocked", .int(-1)), HARMember("dns", .int(-1)), HARMember("connect", .int(-1)),
            HARMember("send", .double(send)), HARMember("wait", .double(wait)),
            HARMember("receive", .double(receive)), HARMember("ssl", .int(-1)),
        ])
    }
}

/// A body as HAR text: the UTF-8 text when it is text (a cut body may end inside a character: up to three bytes
/// are dropped to find the boundary), else base64.
struct BodyText {
    var string: String?
    private let bytes: [UInt8]
    /// The bytes as base64, for bodies that are not text (made only when asked for).
    var base64: String { Data(bytes).base64EncodedString() }

    init(_ bytes: [UInt8], truncated: Bool) {
        self.bytes = bytes
        string = nil
        let drops = truncated ? 0...3 : 0...0
        for drop in drops where bytes.count >= drop {
            let slice = bytes.dropLast(drop)
            guard let text = String(validating: slice, as: UTF8.self) else { continue }
            // NUL and other C0 controls than tab and line breaks mark binary data, valid UTF-8 or not.
            if text.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\t" && $0 != "\n" && $0 != "\r" }) {
                break
            }
            string = text
            break
        }
    }
}

/// Dates as HAR writes them: ISO 8601 in UTC with milliseconds (`2026-11-27T12:00:00.125Z`).
enum HARDate {
    static func iso8601(_ seconds: Double) -> String {
        let millis = Int64((seconds * 1000).rounded(.down))
        var whole = time_t(millis / 1000)
        var parts = tm()
        gmtime_r(&whole, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0" + String(n) : String(n) }
        let ms = Int(millis % 1000)
        let msText = ms < 10 ? "00" + String(ms) : ms < 100 ? "0" + String(ms) : String(ms)
        return String(parts.tm_year + 1900) + "-" + two(parts.tm_mon + 1) + "-" + two(parts.tm_mday) + "T"
            + two(parts.tm_hour) + ":" + two(parts.tm_min) + ":" + two(parts.tm_sec) + "." + msText + "Z"
    }

    /// An HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`, RFC 9110's preferred form) as Unix seconds.
    static func fromHTTPDate(_ text: String) -> Double? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text)?.timeIntervalSince1970
    }
}
