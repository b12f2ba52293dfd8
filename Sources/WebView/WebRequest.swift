import HTTP1Core

/// A request to the web view, as the router sees it: the method, the decoded path and query parameters, and the
/// head's fields. Built from a parsed HTTP/1.1 head; no socket involved.
public struct WebRequest: Sendable, Equatable {
    public var method: String
    /// The path, percent-decoded (`/api/exchanges/12`).
    public var path: String
    /// Query parameters in order, percent-decoded, `+` read as a space.
    public var query: [(String, String)]
    public var headers: HTTPHeaders
    /// The body of a POST (at most `WebRequest.bodyLimit` bytes); empty otherwise.
    public var body: [UInt8]

    /// The largest request body the view reads: its POSTs carry a few fields of JSON.
    public static let bodyLimit = 64 << 10

    public init(
        method: String, path: String, query: [(String, String)] = [], headers: HTTPHeaders = [], body: [UInt8] = []
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// The request of an origin-form target (`/api/exchanges?host=a&limit=5`); nil for a target that is not one
    /// (absolute-form, `*`, an authority) or whose escapes are not UTF-8.
    public init?(head: HTTPRequestHead) {
        let target = head.target
        guard target.hasPrefix("/") else { return nil }
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let fragmentless = parts[0].split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
        guard let path = Self.percentDecoded(fragmentless, plusIsSpace: false) else { return nil }
        var query: [(String, String)] = []
        if parts.count == 2 {
            let text = parts[1].split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)[0]
            for pair in text.split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let key = Self.percentDecoded(kv[0], plusIsSpace: true),
                    let value = Self.percentDecoded(kv.count == 2 ? kv[1] : "", plusIsSpace: true)
                else { return nil }
                query.append((key, value))
            }
        }
        self.init(method: head.method, path: path, query: query, headers: head.headers)
    }

    /// The last value given for `name`, nil when absent.
    public func parameter(_ name: String) -> String? {
        query.last { $0.0 == name }?.1
    }

    public static func == (a: WebRequest, b: WebRequest) -> Bool {
        a.method == b.method && a.path == b.path && a.headers == b.headers && a.body == b.body
            && a.query.map { [$0.0, $0.1] } == b.query.map { [$0.0, $0.1] }
    }

    static func percentDecoded(_ text: Substring, plusIsSpace: Bool) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            case UInt8(ascii: "+") where plusIsSpace:
                bytes.append(UInt8(ascii: " "))
            default:
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
