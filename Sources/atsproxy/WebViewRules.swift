import CaptureExport
import CaptureStore
import Foundation
import RuleStage
import Synchronization
import Throttle
import TrafficRules
import WebView

/// The web view's Rules panel over the proxy's rule book (`run --web`): lists the rules, switches them, and makes
/// simple runtime rules from an exchange (`web-1`, `web-2`…), written as rules-file lines and read by the same parser
/// and loader as the file, so a rule made here is one the file could hold (the panel shows its text to copy).
enum WebViewRules {
    static func control(book: RuleBook, mapLocalDirectory: String) -> WebRuleControl {
        let counter = Counter()
        return WebRuleControl(
            list: { book.entries().map(info) },
            setEnabled: { id, on in book.setEnabled(id, on) },
            create: { request, exchange in
                let id = "web-\(counter.next())"
                return make(request, exchange, id: id, book: book, directory: mapLocalDirectory)
            },
            remove: { id in book.removeRuntimeRule(id) },
            faultKinds: FaultKind.named.map(\.description) + ["status:503"],
            throttleProfiles: LinkProfile.presets.map(\.name))
    }

    /// The numbers of the rules made here, one after the other.
    final class Counter: Sendable {
        private let value = Atomic<Int>(0)
        func next() -> Int { value.add(1, ordering: .relaxed).newValue }
    }

    static func info(_ entry: RuleBook.Entry) -> WebRuleInfo {
        let rule = entry.rule.rule
        return WebRuleInfo(
            id: rule.id, text: rule.text, action: rule.action.keyword, points: rule.points.map(\.description),
            enabled: entry.enabled, origin: entry.origin.rawValue)
    }

    static func make(
        _ request: WebRuleRequest, _ exchange: CapturedExchange, id: String, book: RuleBook, directory: String
    ) -> Result<WebRuleInfo, WebRuleError> {
        let url = exchange.record.url
        guard let host = host(of: url) else { return .failure(WebRuleError("exchange \(exchange.id) has no host")) }
        let line: String
        switch request {
        case .fault(let kind):
            guard FaultKind(spelling: kind) != nil else { return .failure(WebRuleError("no fault KIND '\(kind)'")) }
            line = "[\(id)] fault \(host)=\(kind)"
        case .throttle(let profile):
            line = "[\(id)] throttle \(profile)@\(host)"
        case .breakpoint:
            // The filter language's `text:` is a part of the URL: the whole URL, quoted, is this URL (and any
            // longer one it starts, near enough for "the next request to this URL").
            guard RuleParser.keywords.contains("breakpoint") else {
                return .failure(WebRuleError("breakpoints are not part of this build (no breakpoint rule yet)"))
            }
            guard !url.contains("\""), !url.contains(where: \.isWhitespace) else {
                return .failure(WebRuleError("the URL \(url) cannot be written as a filter (a quote or a space)"))
            }
            line = "[\(id)] breakpoint request:text:\"\(url)\""
        case .mapLocal:
            switch mapLocalFile(exchange, id: id, directory: directory) {
            case .failure(let error): return .failure(error)
            case .success(let path):
                let regex = "^" + escapedPattern(url) + "$"
                // A separator in neither clause: the parser splits at it (the path's own would start a third).
                guard let separator = ["|", "!", "~", "%", ";", ",", "#", "^", "+", "&", "="].first(where: {
                    !regex.contains($0) && !path.contains($0)
                }) else { return .failure(WebRuleError("no separator fits the URL \(url) and \(path)")) }
                line = "[\(id)] map-local \(separator)\(regex)\(separator)\(path)"
            }
        }
        let loaded = RuleSet.parse(file: line, path: "web view").flatMap { RuleLoader.load($0, relativeTo: directory) }
        switch loaded {
        case .failure(let error): return .failure(WebRuleError(error.description))
        case .success(let rules):
            guard let rule = rules.first, book.addRuntimeRule(rule) else {
                return .failure(WebRuleError("a rule named \(id) is already in force"))
            }
            return .success(info(RuleBook.Entry(rule: rule, enabled: true, origin: .runtime)))
        }
    }

    /// `text` as a regex matching it exactly: the regex metacharacters escaped (not `/`, which
    /// `NSRegularExpression.escapedPattern` escapes too, to no purpose in a rule that shows its text).
    static func escapedPattern(_ text: String) -> String {
        var out = ""
        for c in text {
            if "\\^$.|?*+()[]{}".contains(c) { out.append("\\") }
            out.append(c)
        }
        return out
    }

    /// The URL's host, lowercased, without the port (a `CONNECT`'s authority too); nil when it has none.
    static func host(of url: String) -> String? {
        var rest = Substring(url)
        if let scheme = rest.range(of: "://") { rest = rest[scheme.upperBound...] }
        var authority = rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex)]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if authority.hasPrefix("["), let close = authority.firstIndex(of: "]") {
            authority = authority[...close]
        } else if let colon = authority.lastIndex(of: ":") {
            authority = authority[..<colon]
        }
        return authority.isEmpty ? nil : authority.lowercased()
    }

    /// The exchange's response body, decoded as the client would read it, kept in `directory` (made private to the
    /// user: bodies may hold secrets), named so that map local serves it with its Content-Type.
    static func mapLocalFile(_ exchange: CapturedExchange, id: String, directory: String)
        -> Result<String, WebRuleError>
    {
        let detail = exchange.record.detail
        let head = detail?.clientResponse ?? detail?.response
        guard let body = detail?.responseBody, head != nil else {
            return .failure(WebRuleError("exchange \(exchange.id) has no captured response"))
        }
        guard !body.isTruncated else {
            return .failure(WebRuleError(
                "exchange \(exchange.id)'s response body was cut at the capture's limit (\(body.bytes.count) of "
                    + "\(body.totalBytes) bytes): run with a larger --capture-bodies"))
        }
        var bytes = body.bytes
        if let coding = head?.headers[first: "Content-Encoding"], !coding.isEmpty, coding.lowercased() != "identity" {
            guard let decoded = ContentDecoding.decode(bytes, coding: coding) else {
                return .failure(WebRuleError("cannot decode the response body (Content-Encoding: \(coding))"))
            }
            bytes = decoded
        }
        let type = head?.headers[first: "Content-Type"]?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased() ?? ""
        let path = (directory as NSString).appendingPathComponent("\(id)-exchange-\(exchange.id).\(fileExtension(type))")
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            guard FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: 0o600])
            else { return .failure(WebRuleError("cannot write \(path)")) }
        } catch {
            return .failure(WebRuleError("cannot make \(directory): \(error.localizedDescription)"))
        }
        return .success(path)
    }

    /// The extension map local reads the Content-Type back from.
    static func fileExtension(_ type: String) -> String {
        switch type {
        case "application/json", "text/json": "json"
        case "text/html": "html"
        case "text/css": "css"
        case "text/javascript", "application/javascript": "js"
        case "text/plain": "txt"
        case "application/xml", "text/xml": "xml"
        case "image/png": "png"
        case "image/jpeg": "jpg"
        case "image/gif": "gif"
        case "image/svg+xml": "svg"
        case "image/webp": "webp"
        default: type.hasSuffix("+json") ? "json" : "bin"
        }
    }
}
