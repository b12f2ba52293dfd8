import HTTP1Core

/// One map-local rule: requests whose URL matches `urlPattern` are answered from `localPath`, a file or a directory
/// (mitmproxy's `--map-local [/filter]/url-regex/file-or-directory`; the filter is the rules stage's business).
public struct MapLocalRule: Sendable {
    /// The regular expression, as written; searched for anywhere in the request's full URL.
    public let urlPattern: String
    /// The file or directory, as written (relative paths are the rules file's business to resolve).
    public let localPath: String
    let compiled: CompiledRegex

    /// A rule; a pattern that is not a valid regular expression is refused here, when the rules load.
    public init(urlPattern: String, localPath: String) throws(RuleActionError) {
        guard !localPath.isEmpty else { throw RuleActionError("map local: the file or directory is empty") }
        do {
            compiled = try CompiledRegex(urlPattern)
        } catch {
            throw RuleActionError("map local: \(urlPattern) is not a valid regular expression: \(error)")
        }
        self.urlPattern = urlPattern
        self.localPath = localPath
    }
}

/// The parts of a request map local reads.
public struct LocalRequest: Sendable {
    public var method: String
    /// The full URL (`https://host/path?query`), what the rule's regex is searched in.
    public var url: String
    public var headers: HTTPHeaders

    public init(method: String, url: String, headers: HTTPHeaders = []) {
        self.method = method
        self.url = url
        self.headers = headers
    }
}

/// Map local: a request answered from a local file or directory, with mitmproxy's semantics and a web server's
/// care.
///
/// - A file: every matching URL gets that file.
/// - A directory: the part of the URL after the match (or the regex's first group, when it has one), without the
///   query, percent-decoded, names a file below the directory; an empty part or a directory names its `index.html`.
///   As in mitmproxy, a name with characters other than `[0-9A-Za-z-_.=(),/]` is also tried with each of them
///   replaced by `_` (so a URL with `?` or `:` in its path can be saved as a file).
/// - Never a file outside the directory: a `..` component (also percent-encoded, `%2e%2e`) is refused, and the
///   candidate's real path (symlinks resolved) must lie inside the directory's real path. Both answer 404 with an
///   `outsideDirectory` notice; a missing file answers 404 with `missingFile`.
/// - The answer has a Content-Type from the extension (``MediaTypes``), Content-Length, `Accept-Ranges: bytes` and
///   an ETag (size and modification time): `If-None-Match` gets 304, a single `Range` on a GET gets 206 with
///   Content-Range (416 when unsatisfiable; several ranges, or an `If-Range` that is not the ETag, get the whole
///   file), HEAD gets the headers without the body. Any other method gets the file like GET (a mocked POST).
/// - Bodies are read whole into memory up to `limit` bytes: a larger file (or range) is answered 500 with a body
///   saying so and a `tooLarge` notice; a HEAD never reads, so it always answers.
public enum MapLocal {
    /// The default limit on the bytes read for one answer.
    public static let defaultLimit = 64 << 20

    /// The local answer to `request` under `rule`, or nil when the rule's regex does not match the URL.
    public static func respond(
        to request: LocalRequest, rule: MapLocalRule, files: some FileReading, limit: Int = defaultLimit
    ) -> LocalResponse? {
        guard let match = request.url.firstMatch(of: rule.compiled.regex) else { return nil }
        guard let rootInfo = files.info(rule.localPath), let root = files.realPath(rule.localPath) else {
            return notFound(
                request, ActionNotice(.missingFile, "map local: \(rule.localPath) does not exist"),
                shown: rule.localPath)
        }
        if !rootInfo.isDirectory {
            return FileAnswer.serve(path: root, info: rootInfo, request: request, files: files, limit: limit)
        }
        let suffix: Substring
        if match.output.count > 1, let group = match.output[1].substring {
            suffix = group
        } else {
            suffix = request.url[match.range.upperBound...]
        }
        let relative = String(suffix.prefix { $0 != "?" && $0 != "#" })
        switch candidates(relative) {
        case .outside(let shown):
            return notFound(
                request, ActionNotice(.outsideDirectory, "map local: \(shown) is outside \(rule.localPath)"),
                shown: shown)
        case .paths(let names, let shown):
            var escaped = false
            for name in names {
                let path = root == "/" ? "/" + name : root + "/" + name
                guard let info = files.info(path), info.isRegularFile, let real = files.realPath(path) else { continue }
                guard contains(root: root, real) else {
                    escaped = true
                    continue
                }
                return FileAnswer.serve(path: real, info: info, request: request, files: files, limit: limit)
            }
            if escaped {
                return notFound(
                    request,
                    ActionNotice(
                        .outsideDirectory, "map local: \(shown) resolves outside \(rule.localPath) (a symlink)"),
                    shown: shown)
            }
            return notFound(
                request, ActionNotice(.missingFile, "map local: no file for \(shown) in \(rule.localPath)"),
                shown: shown)
        }
    }

    enum Candidates: Equatable {
        /// Names relative to the directory, in the order to try, and the name to show in notices.
        case paths([String], shown: String)
        /// A `..` component, or a NUL byte: never looked up.
        case outside(shown: String)
    }

    /// The relative names to try for the URL part below the match (mitmproxy's `file_candidates`).
    static func candidates(_ urlPart: String) -> Candidates {
        let decoded = percentDecoded(urlPart)
        let shown = decoded.isEmpty ? "/" : decoded
        var components: [Substring] = []
        for component in decoded.split(separator: "/", omittingEmptySubsequences: true) {
            if component == ".." || component.contains("\0") { return .outside(shown: shown) }
            if component != "." { components.append(component) }
        }
        let name = components.joined(separator: "/")
        if name.isEmpty { return .paths(["index.html"], shown: shown) }
        var names = [name, name + "/index.html"]
        let escaped = String(name.map { isSafe($0) ? $0 : "_" })
        if escaped != name { names += [escaped, escaped + "/index.html"] }
        return .paths(names, shown: shown)
    }

    static func isSafe(_ c: Character) -> Bool {
        guard let a = c.asciiValue else { return false }
        switch a {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "A")...UInt8(ascii: "Z"):
            return true
        default:
            return "-_.=(),/".contains(c)
        }
    }

    /// `%XX` escapes decoded as UTF-8 (an invalid sequence stays as written, so it matches no file).
    static func percentDecoded(_ s: String) -> String {
        guard s.contains("%") else { return s }
        var bytes: [UInt8] = []
        var utf8 = Array(s.utf8)[...]
        while let b = utf8.popFirst() {
            if b == UInt8(ascii: "%"), utf8.count >= 2, let hi = hexValue(utf8[utf8.startIndex]),
                let lo = hexValue(utf8[utf8.startIndex + 1])
            {
                bytes.append(hi << 4 | lo)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(validating: bytes, as: UTF8.self) ?? s
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Whether `path` (a real path) is `root` or below it.
    static func contains(root: String, _ path: String) -> Bool {
        if path == root { return true }
        return path.hasPrefix(root.hasSuffix("/") ? root : root + "/")
    }

    static func notFound(_ request: LocalRequest, _ notice: ActionNotice, shown: String) -> LocalResponse {
        var response = FileAnswer.plain(
            status: 404, "ATSProxy map local: not found: \(shown)\n", method: request.method)
        response.notices = [notice]
        return response
    }
}
