import HTTP1Core
import ProxyTrace

/// "Copy as curl": a command that repeats an exchange's request through the proxy (`-x`, `--cacert`), with the
/// client's own header fields. Fields curl sets itself or the proxy consumes are left out.
enum CurlCommand {
    static let omitted: Set<String> = [
        "host", "content-length", "connection", "proxy-connection", "proxy-authorization", "keep-alive",
        "transfer-encoding", "te", "upgrade",
    ]

    static func make(for exchange: ExchangeSummary, proxyURL: String, caPath: String) -> String {
        var words = ["curl", "-x", quoted(proxyURL), "--cacert", quoted(caPath)]
        let detail = exchange.detail
        if exchange.method == "CONNECT" {
            // A tunnel or a refused handshake: repeat the connection itself.
            words += ["-v", quoted("https://" + exchange.url.replacingPrefix("https://", with: "") + "/")]
            return words.joined(separator: " ")
        }
        if exchange.httpVersion.hasPrefix("HTTP/2") { words.append("--http2") }
        if exchange.method != "GET" { words += ["-X", quoted(exchange.method)] }
        for field in detail?.request?.headers.fields ?? [] where !omitted.contains(field.name.lowercased()) {
            guard !field.name.hasPrefix(":") else { continue }
            words += ["-H", quoted(field.name + ": " + FieldBytes.display(field.value))]
        }
        if let body = detail?.requestBody, body.totalBytes > 0 {
            if !body.isTruncated, let text = String(validating: body.bytes, as: UTF8.self),
                !text.contains(where: { $0 == "\u{0}" })
            {
                words += ["--data-binary", quoted(text)]
            } else {
                // Not text, or cut in the capture: the kept bytes are at the body's API route.
                words += ["--data-binary", "@request-body.bin"]
            }
        }
        words.append(quoted(exchange.url))
        return words.joined(separator: " ")
    }

    /// POSIX shell single quotes: `it's` → `'it'\''s'`.
    static func quoted(_ word: String) -> String {
        let plain = word.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_./:@=%+,".contains($0)) }
        if plain && !word.isEmpty { return word }
        return "'" + word.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

extension String {
    fileprivate func replacingPrefix(_ prefix: String, with other: String) -> String {
        hasPrefix(prefix) ? other + dropFirst(prefix.count) : self
    }
}
