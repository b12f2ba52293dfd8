import HTTP1Core
import Inflate

/// One modify-body rule's action (mitmproxy's `--modify-body [/filter]/regex/replacement`): every match of the
/// regex in a text body replaced.
///
/// Unlike mitmproxy, which rewrites raw (possibly compressed) bytes, the regex runs on the decoded text:
/// - the body is decoded from its `Content-Encoding` (gzip, deflate) and re-encoded in the same format after;
///   `br`, `zstd` and stacked codings are left alone with an `unsupportedEncoding` notice;
/// - the text is decoded by the `Content-Type` charset (UTF-8 when absent; US-ASCII and ISO-8859-1 too); a type
///   that is not text (an image, protobuf…) or an unknown charset is left alone with a `notText` notice; with no
///   Content-Type at all, a body that is valid UTF-8 counts as text;
/// - a body (or its decoded form) over `limit` bytes is left alone with a `tooLarge` notice;
/// - an existing Content-Length is set to the new length, in place; a chunked or HTTP/2 body is framed by the
///   relay anyway. An empty body is never rewritten (HEAD, 204 and 304 answers have none to rewrite).
///
/// The replacement uses Python's syntax, as mitmproxy users write it: `\1`…`\99` and `\g<1>` or `\g<name>` for
/// groups, `\\` for a backslash, `\n`, `\r`, `\t`.
public struct BodyModification: Sendable {
    public let pattern: String
    public let replacement: String
    let compiled: CompiledRegex

    /// A modification; a pattern that is not a valid regular expression is refused when the rules load.
    public init(pattern: String, replacement: String) throws(RuleActionError) {
        guard !pattern.isEmpty else { throw RuleActionError("modify body: the regular expression is empty") }
        do {
            compiled = try CompiledRegex(pattern)
        } catch {
            throw RuleActionError("modify body: \(pattern) is not a valid regular expression: \(error)")
        }
        self.pattern = pattern
        self.replacement = replacement
    }

    /// The default limit on a body's size, encoded and decoded.
    public static let defaultLimit = 16 << 20

    /// What a body rewrite did: both heads for the web view, the body to send, and why anything was left alone.
    public struct Change<Head: Equatable & Sendable>: Equatable, Sendable {
        public var original: Head
        public var changed: Head
        public var body: [UInt8]
        /// How many matches were replaced, over all the modifications.
        public var replacements: Int
        public var notices: [ActionNotice]
    }

    /// A request's body with the modifications applied in order.
    public static func apply(
        _ modifications: [BodyModification], to head: HTTPRequestHead, body: [UInt8], limit: Int = defaultLimit
    ) -> Change<HTTPRequestHead> {
        var changed = head
        let (body, count, notices) = apply(modifications, headers: &changed.headers, body: body, limit: limit)
        return Change(original: head, changed: changed, body: body, replacements: count, notices: notices)
    }

    /// A response's body with the modifications applied in order.
    public static func apply(
        _ modifications: [BodyModification], to head: HTTPResponseHead, body: [UInt8], limit: Int = defaultLimit
    ) -> Change<HTTPResponseHead> {
        var changed = head
        let (body, count, notices) = apply(modifications, headers: &changed.headers, body: body, limit: limit)
        return Change(original: head, changed: changed, body: body, replacements: count, notices: notices)
    }

    static func apply(
        _ modifications: [BodyModification], headers: inout HTTPHeaders, body: [UInt8], limit: Int
    ) -> (body: [UInt8], replacements: Int, notices: [ActionNotice]) {
        guard !modifications.isEmpty, !body.isEmpty else { return (body, 0, []) }
        guard body.count <= limit else {
            return (body, 0, [ActionNotice(.tooLarge, "modify body: the body is \(body.count) bytes, over \(limit)")])
        }
        // Content-Encoding: decode, and remember how to encode again.
        let codings = headers.listTokens(for: "Content-Encoding").filter { $0 != "identity" }
        var format: Inflate.Format?
        var decoded = body
        if !codings.isEmpty {
            switch codings {
            case ["gzip"], ["x-gzip"]: format = .gzip
            case ["deflate"]: format = .zlib
            default:
                return (
                    body, 0,
                    [
                        ActionNotice(
                            .unsupportedEncoding,
                            "modify body: Content-Encoding \(codings.joined(separator: ", ")) is left alone")
                    ]
                )
            }
            do {
                decoded = try Inflate.inflate(body, format: format!, limit: limit)
            } catch .tooLarge {
                return (body, 0, [ActionNotice(.tooLarge, "modify body: the decoded body is over \(limit) bytes")])
            } catch {
                // HTTP's deflate is zlib-wrapped, but some servers send raw deflate.
                guard format == .zlib, let raw = try? Inflate.inflate(body, format: .raw, limit: limit) else {
                    return (
                        body, 0,
                        [ActionNotice(.undecodable, "modify body: the \(codings[0]) body does not decode (\(error))")]
                    )
                }
                format = .raw
                decoded = raw
            }
        }
        // Charset: the text to run the regex on.
        let charset: TextCharset
        switch TextCharset.of(contentType: headers[first: "Content-Type"], body: decoded) {
        case .success(let found): charset = found
        case .failure(let notice): return (body, 0, [notice])
        }
        guard var text = charset.decode(decoded) else {
            return (body, 0, [ActionNotice(.notText, "modify body: the body is not valid \(charset.name)")])
        }
        var count = 0
        for modification in modifications {
            let (replaced, n) = modification.replace(in: text)
            text = replaced
            count += n
        }
        guard count > 0 else { return (body, 0, []) }
        guard let encodedText = charset.encode(text) else {
            return (
                body, 0,
                [ActionNotice(.notText, "modify body: the replacement has characters \(charset.name) cannot hold")]
            )
        }
        var result = encodedText
        if let format {
            guard let compressed = Deflate.deflate(encodedText, format: format) else {
                return (body, 0, [ActionNotice(.undecodable, "modify body: re-encoding the body failed")])
            }
            result = compressed
        }
        if headers.contains(name: "Content-Length") { headers.setContentLength(result.count) }
        return (result, count, [])
    }

    /// The text with every match replaced, and how many there were.
    func replace(in text: String) -> (String, Int) {
        var result = ""
        var count = 0
        var last = text.startIndex
        for match in text.matches(of: compiled.regex) {
            result += text[last..<match.range.lowerBound]
            result += expand(match)
            last = match.range.upperBound
            count += 1
        }
        guard count > 0 else { return (text, 0) }
        result += text[last...]
        return (result, count)
    }

    /// The replacement for one match, its group references filled in (Python's `re.sub` template syntax).
    func expand(_ match: Regex<AnyRegexOutput>.Match) -> String {
        var out = ""
        var chars = replacement[...]
        func group(_ reference: Substring) -> String {
            if let index = Int(reference) {
                guard index < match.output.count else { return "" }
                return match.output[index].substring.map(String.init) ?? ""
            }
            return match.output[String(reference)]?.substring.map(String.init) ?? ""
        }
        while let c = chars.popFirst() {
            guard c == "\\", let next = chars.first else {
                out.append(c)
                continue
            }
            switch next {
            case "\\":
                out.append("\\")
                chars.removeFirst()
            case "n":
                out.append("\n")
                chars.removeFirst()
            case "r":
                out.append("\r")
                chars.removeFirst()
            case "t":
                out.append("\t")
                chars.removeFirst()
            case "g" where chars.dropFirst().first == "<":
                let rest = chars.dropFirst(2)
                if let close = rest.firstIndex(of: ">") {
                    out += group(rest[..<close])
                    chars = rest[rest.index(after: close)...]
                } else {
                    out.append(c)
                }
            case let d where d.isASCII && d.isNumber:
                let digits = chars.prefix(2).prefix { $0.isASCII && $0.isNumber }
                out += group(digits)
                chars = chars.dropFirst(digits.count)
            default:
                out.append(c)
            }
        }
        return out
    }
}

extension HTTPHeaders {
    /// Content-Length set to `length` where it is (the first field keeps its place and spelling; duplicates go).
    mutating func setContentLength(_ length: Int) {
        var seen = false
        fields = fields.compactMap { field in
            guard field.name.lowercased() == "content-length" else { return field }
            if seen { return nil }
            seen = true
            return Field(name: field.name, value: String(length))
        }
    }
}
