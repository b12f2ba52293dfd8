import ATSPolicy
import CaptureStore
import HTTP1Core
import ProxyTrace

/// One captured exchange in full, as text for a terminal (`atsproxy show FILE ID`): the console line, timings,
/// the heads of both legs, body previews (text, or a hex dump for binary; marked when cut), the TLS of each leg,
/// the ATS decision with its violations and fixes, and the connection's CFNetwork-style trace.
public struct ExchangeText {
    /// Body bytes shown per body; the rest is counted, not shown.
    public var previewBytes = 2048
    public var colour = false

    public init(previewBytes: Int = 2048, colour: Bool = false) {
        self.previewBytes = previewBytes
        self.colour = colour
    }

    /// The text, ending in a newline. `trace` is the connection's records (`CaptureReader.traceRecords`).
    public func render(_ exchange: CapturedExchange, trace: [CapturedTraceRecord]) -> String {
        let e = exchange.record
        var out: [String] = []
        var title = "Exchange \(exchange.id) (run \(exchange.runID)"
        if let c = e.connection { title += ", connection \(c.connectionID)" }
        out.append(title + ")")
        out.append("  " + e.consoleLine(colour: colour))
        if let t = e.detail?.timings {
            var line = "  Started \(HARDate.iso8601(t.started))"
            if let sent = t.requestSent { line += "; request sent +\(ms(sent - t.started))" }
            if let first = t.firstResponseByte { line += "; first response byte +\(ms(first - t.started))" }
            line += "; ended +\(ms(t.ended - t.started))"
            out.append(line)
        }
        if let c = e.connection {
            out.append("  Client: \(c.clientAddress ?? "address not recorded")"
                + (c.upstreamAddress.map { "; upstream: \($0)" } ?? ""))
        }
        if let action = e.action { out.append("  The proxy: \(Self.actionText(action))") }
        if let interruption = e.interruption { out.append("  Incomplete: \(interruption)") }
        if let note = e.note { out.append("  Note: \(note)") }
        if let original = e.replayOf { out.append("  Replay of #\(original) (sent again through the proxy)") }
        // Which rules changed or answered the exchange: the heads below are then the proxy's, not only the server's.
        section(&out, "Rules that acted", e.rules.map { "\($0.summary) (at the \($0.point) point)" })

        let detail = e.detail
        if let head = detail?.request {
            // An HTTP/2 client's head is recorded as the HTTP/1.1 view of its header list.
            let h2 = e.connection?.clientTLS?.alpn == "h2" && head.version.major == 1
            section(&out, "Request, as the client sent it" + (h2 ? " (over HTTP/2; shown as HTTP/1.1)" : ""), Self.lines(head))
        }
        if let head = detail?.forwardedRequest {
            section(&out, "Request, as forwarded upstream", Self.lines(head))
        }
        if let body = detail?.requestBody, body.totalBytes > 0 { section(&out, bodyTitle("Request body", body), preview(body)) }
        if let head = detail?.response {
            section(&out, "Response, as the upstream sent it", Self.lines(head))
        }
        if let head = detail?.clientResponse {
            let who = detail?.response == nil ? "Response, answered by the proxy" : "Response, as the client got it"
            section(&out, who, Self.lines(head))
        }
        if let body = detail?.responseBody, body.totalBytes > 0 {
            section(&out, bodyTitle("Response body", body), preview(body))
        }
        if let c = e.connection { section(&out, "TLS", tlsLines(c)) }
        section(&out, "ATS", atsLines(e))
        if !trace.isEmpty {
            var lines: [String] = []
            for item in trace {
                let r = item.record
                lines.append("\(TraceTime(unixTime: item.time)) \(r.title): \(r.subject)")
                let width = r.fields.map(\.key.count).max() ?? 0
                for field in r.fields {
                    let parts = field.value.split(separator: "\n", omittingEmptySubsequences: false)
                    let pad = String(repeating: " ", count: width - field.key.count)
                    lines.append("    " + pad + field.key + ": " + (parts.first.map(String.init) ?? ""))
                    for rest in parts.dropFirst() { lines.append("    " + String(repeating: " ", count: width + 2) + rest) }
                }
            }
            section(&out, "Trace (the connection's CFNetwork-style records)", lines)
        }
        return out.joined(separator: "\n") + "\n"
    }

    private func section(_ out: inout [String], _ title: String, _ lines: [String]) {
        guard !lines.isEmpty else { return }
        out.append("")
        out.append(colour ? "\u{1B}[1m" + title + "\u{1B}[0m" : title)
        out += lines.map { "  " + $0 }
    }

    private func ms(_ seconds: Double) -> String { HARValue.number(seconds * 1000) + " ms" }

    static func actionText(_ action: ExchangeAction) -> String {
        switch action {
        case .relayed: "relayed it"
        case .annotated: "relayed it although ATS forbids it, with X-ATS-* headers (--ats annotate)"
        case .blockedHandshake: "failed the client's TLS handshake as the app's would fail (--block tls)"
        case .blockedAnswer: "answered with the violation itself (--block http)"
        case .tunnelled: "tunnelled it without interception"
        case .refused: "refused it before any upstream was involved"
        case .proxySite: "answered it with its own set-up site (not the app's traffic)"
        case .failed: "could not reach the upstream"
        case .injected: "failed it on purpose, as a rule asked (an injected failure, not the server's)"
        }
    }

    static func lines(_ head: HTTPRequestHead) -> [String] {
        [head.method + " " + head.target + " " + head.version.description] + head.headers.fields.map { $0.name + ": " + FieldBytes.display($0.value) }
    }

    static func lines(_ head: HTTPResponseHead) -> [String] {
        [head.version.description + " " + String(head.status) + (head.reason.isEmpty ? "" : " " + head.reason)]
            + head.headers.fields.map { $0.name + ": " + FieldBytes.display($0.value) }
    }

    private func bodyTitle(_ name: String, _ body: CapturedBody) -> String {
        var title = "\(name): \(body.totalBytes) bytes"
        if body.isTruncated { title += " (CUT: the capture kept the first \(body.bytes.count))" }
        if body.bytes.count > previewBytes { title += ", first \(previewBytes) shown" }
        return title
    }

    /// Text as it is (control characters shown as `\u{…}`), or a hex dump when the bytes are not text.
    func preview(_ body: CapturedBody) -> [String] {
        let shown = Array(body.bytes.prefix(previewBytes))
        if body.bytes.isEmpty { return ["(no bytes kept: --capture-bodies 0)"] }
        let text = BodyText(shown, truncated: shown.count < body.totalBytes)
        if let string = text.string {
            return string.split(separator: "\n", omittingEmptySubsequences: false).map { line in
                line.replacingOccurrences(of: "\r", with: "")
            }
        }
        return Self.hexDump(shown)
    }

    /// `00000000  89 50 4e 47 …  |.PNG....|`, 16 bytes a line.
    static func hexDump(_ bytes: [UInt8]) -> [String] {
        let digits = Array("0123456789abcdef")
        var lines: [String] = []
        var offset = 0
        while offset < bytes.count {
            let row = bytes[offset..<min(offset + 16, bytes.count)]
            var line = String(String(offset, radix: 16).leftPadded(to: 8)) + "  "
            for (i, b) in row.enumerated() {
                line.append(digits[Int(b >> 4)])
                line.append(digits[Int(b & 0xF)])
                line += i == 7 ? "  " : " "
            }
            line += String(repeating: "   ", count: 16 - row.count) + (row.count <= 8 ? " " : "")
            line += " |" + String(row.map { (0x20..<0x7F).contains($0) ? Character(UnicodeScalar($0)) : "." }) + "|"
            lines.append(line)
            offset += 16
        }
        return lines
    }

    private func tlsLines(_ c: ConnectionRecord) -> [String] {
        var lines: [String] = []
        func leg(_ name: String, _ f: TLSLegFacts) -> String {
            var parts = [f.version ?? "version unknown"]
            if let suite = f.cipherSuite { parts.append(suite) }
            if let alpn = f.alpn { parts.append("ALPN " + alpn) }
            if let sni = f.serverName { parts.append("SNI " + sni) }
            parts.append(f.resumed ? "resumed" : "full handshake")
            return name + ": " + parts.joined(separator: ", ")
        }
        if let f = c.clientTLS { lines.append(leg("Client ⇄ proxy", f)) }
        if let f = c.upstreamTLS { lines.append(leg("Proxy ⇄ upstream", f)) }
        if let facts = c.upstreamHandshake {
            if let failure = facts.failure { lines.append("Upstream handshake failed: \(failure)") }
            if let group = facts.keyExchangeGroup { lines.append("Key exchange: \(group)") }
            lines.append("Trust: \(facts.trust)" + (facts.hostnameMatches ? "; the name matches" : "; the name does NOT match"))
            for (i, cert) in facts.chain.enumerated() {
                let key = cert.keyType.rawValue + " " + String(cert.keyBits)
                lines.append(
                    "Chain \(i): \(cert.subject) (issuer \(cert.issuer); \(key); \(cert.signatureHash.rawValue); "
                        + "until \(HARDate.iso8601(cert.notAfter.timeIntervalSince1970).prefix(10)))")
            }
        }
        if lines.isEmpty { lines.append("none on this connection (plain HTTP, or a tunnel the proxy did not open)") }
        return lines
    }

    private func atsLines(_ e: ExchangeSummary) -> [String] {
        var lines: [String] = []
        let verdict: String = switch e.outcome {
        case .allowed: "allowed"
        case .blocked: "BLOCKED"
        case .violation: "VIOLATION (let through, annotated)"
        case .notEvaluated: "not evaluated"
        case .failed: "FAILED (the upstream could not be reached)"
        }
        lines.append("Verdict: " + verdict)
        for error in e.errors {
            lines.append("The app would get: \(error.urlError.code) \(error.urlError.name)"
                + (error.sslError.map { ", _kCFStreamErrorCodeKey=\($0.code) \($0.name)" } ?? ""))
        }
        if let d = e.connection?.decision {
            lines.append("Decided by: " + (d.keyPath.isEmpty ? "ATS defaults (no key applies)" : d.keyPathString))
            lines.append("Why: " + d.reason)
            for note in d.notes { lines.append("Note: " + note) }
        }
        for v in e.connection?.violations ?? [] {
            lines.append("Violation (\(v.kind.rawValue)): \(v.explanation)")
            lines.append("  Fix: \(v.fix.summary)")
            if let snippet = v.fix.plistSnippet {
                lines += snippet.split(separator: "\n").map { "    " + $0 }
            }
        }
        return lines
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
