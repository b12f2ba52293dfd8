import ATSPolicy
import ProxyTrace
import TLSCore

@testable import ProxyCore

/// A command the session gave, with the plaintext the in-memory peer decrypted from it (sends over TLS only).
struct Sent {
    var command: ProxyCommand
    var plaintext: [UInt8]?
}

/// What a playbook expects of one command (`<<`), for commands whose exact value a test does not care about. Exact
/// commands are written as `ProxyCommand`s; these match by kind and a predicate, and print as the expectation.
struct Expect: Sendable, CustomStringConvertible {
    enum Kind {
        /// One command.
        case one(@Sendable (Sent) -> Bool)
        /// Any number (zero or more) of `.log` commands.
        case anyLogs
    }

    let kind: Kind
    let description: String

    static func exactly(_ command: ProxyCommand) -> Expect {
        Expect(kind: .one { $0.command == command }, description: WireText.command(command))
    }

    static func sendToClient(_ bytes: BytesMatch) -> Expect {
        Expect(kind: .one { sent in
            if case .sendToClient(let b) = sent.command { bytes.matches(b, sent.plaintext) } else { false }
        }, description: "sendToClient(\(bytes))")
    }

    static func sendToUpstream(_ bytes: BytesMatch) -> Expect {
        Expect(kind: .one { sent in
            if case .sendToUpstream(let b) = sent.command { bytes.matches(b, sent.plaintext) } else { false }
        }, description: "sendToUpstream(\(bytes))")
    }

    static func sendToLane(_ lane: UpstreamLane, _ bytes: BytesMatch) -> Expect {
        Expect(kind: .one { sent in
            if case .sendToLane(lane, let b) = sent.command { bytes.matches(b, sent.plaintext) } else { false }
        }, description: "sendToLane(\(lane), \(bytes))")
    }

    static func log(_ log: LogMatch) -> Expect {
        Expect(kind: .one { if case .log(let l) = $0.command { log.matches(l) } else { false } },
               description: "log(\(log))")
    }

    /// `.startTimer` of this kind, whatever its duration.
    static func startTimer(_ timer: ProxyTimer) -> Expect {
        Expect(kind: .one { if case .startTimer(let t, _) = $0.command { t == timer } else { false } },
               description: "startTimer(.\(timer), after: any)")
    }

    /// Any log commands (notices, trace records), or none: for playbooks about the wire, not the log.
    static let anyLogs = Expect(kind: .anyLogs, description: "(any logs)")

    func matches(_ sent: Sent) -> Bool {
        switch kind {
        case .one(let predicate): predicate(sent)
        case .anyLogs: if case .log = sent.command { true } else { false }
        }
    }
}

/// What bytes a send must carry.
struct BytesMatch: Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The bytes sent, and what the receiving TLS peer decrypted from them.
    let matches: @Sendable ([UInt8], [UInt8]?) -> Bool
    let description: String

    /// Exactly this text, in the clear.
    init(stringLiteral text: String) {
        let expected = Array(text.utf8)
        matches = { b, _ in b == expected }
        description = WireText.quoted(expected)
    }

    init(_ description: String, _ matches: @escaping @Sendable ([UInt8], [UInt8]?) -> Bool) {
        self.description = description
        self.matches = matches
    }

    init(_ description: String, bytes matches: @escaping @Sendable ([UInt8]) -> Bool) {
        self.init(description) { b, _ in matches(b) }
    }

    /// TLS records whose plaintext, as the receiving peer decrypted it, is `plaintext` (text in the clear).
    static func tls(_ plaintext: BytesMatch) -> BytesMatch {
        BytesMatch("TLS[…] ⇒ \(plaintext)") { b, decrypted in
            guard TLSRecords(b) != nil, let decrypted else { return false }
            return plaintext.matches(decrypted, nil)
        }
    }

    /// Text starting with `prefix`.
    static func prefix(_ prefix: String) -> BytesMatch {
        BytesMatch("\(WireText.quoted(Array(prefix.utf8)))…", bytes: { $0.starts(with: prefix.utf8) })
    }

    /// Text holding each of `parts` and none of `excluding`.
    static func containing(_ parts: [String], excluding: [String] = []) -> BytesMatch {
        let quote = { (text: String) in WireText.quoted(Array(text.utf8)) }
        let shown = parts.map(quote).joined(separator: " … ")
            + (excluding.isEmpty ? "" : " (without \(excluding.map(quote).joined(separator: ", ")))")
        return BytesMatch("…\(shown)…", bytes: { b in
            let text = String(decoding: b, as: UTF8.self)
            return parts.allSatisfy(text.contains) && !excluding.contains(where: text.contains)
        })
    }

    /// HTTP/2 frames (after the client preface, if any) as `WireText.h2Frames` writes them, e.g.
    /// `"SETTINGS, WINDOW_UPDATE 0, HEADERS 1 END_STREAM"` (a preface shows as `preface`).
    static func h2(_ frames: String) -> BytesMatch {
        BytesMatch("h2[\(frames)]", bytes: { WireText.h2Frames($0) == "h2[\(frames)]" })
    }

    /// A TLS ClientHello offering exactly `alpn` (in that order): which protocols an upstream connection offers.
    static func clientHello(alpn: [String]) -> BytesMatch {
        BytesMatch("TLS[ClientHello offering \(alpn.joined(separator: ", "))]", bytes: { b in
            guard let hello = try? ClientHelloParser.parse(b) else { return false }
            return hello.alpnProtocols == alpn
        })
    }

    /// Whole TLS records, whatever they carry (handshake flights, encrypted data).
    static let tlsRecords = BytesMatch("TLS[…]", bytes: { TLSRecords($0) != nil })

    /// TLS records that hold a fatal `alert` in the clear: a refused handshake.
    static func tlsAlert(_ alert: TLSAlert) -> BytesMatch {
        BytesMatch("TLS[… alert(fatal \(alert.name))]", bytes: { b in
            TLSRecords(b)?.clearAlerts.contains { $0.fatal && $0.alert == alert } == true
        })
    }
}

/// What a `.log` command must say.
struct LogMatch: Sendable, CustomStringConvertible {
    let matches: @Sendable (ProxyLog) -> Bool
    let description: String

    /// An exchange (a console line) for which `predicate` holds; `about` says what in the transcript.
    static func exchange(_ about: String = "…", _ predicate: @escaping @Sendable (ExchangeSummary) -> Bool)
        -> LogMatch
    {
        LogMatch(matches: { if case .exchange(let e) = $0 { predicate(e) } else { false } },
                 description: "exchange: \(about)")
    }

    /// The console line of one exchange: its method, URL, status (nil: none), outcome and first error's codes
    /// (`-1202/-9814`; nil: none), whatever its sizes, duration and note.
    static func exchange(
        _ method: String, _ url: String, status: Int?, _ outcome: ExchangeSummary.ATSOutcome, codes: String?
    ) -> LogMatch {
        let about = "\(method) \(url) \(status.map(String.init) ?? "---") \(outcome) \(codes ?? "(no error)")"
        return exchange(about) { e in
            e.method == method && e.url == url && e.status == status && e.outcome == outcome
                && e.errors.first?.shortCode == codes
        }
    }

    /// A CFNetwork-style trace record titled `title` whose subject or a field contains `text` (nil: any).
    static func trace(_ title: String, containing text: String? = nil) -> LogMatch {
        LogMatch(matches: { log in
            guard case .diagnostics(let r) = log, r.title == title else { return false }
            guard let text else { return true }
            return ([r.subject] + r.fields.map { "\($0.key): \($0.value)" }).contains { $0.contains(text) }
        }, description: "trace: \(title)" + (text.map { " {…\($0)…}" } ?? ""))
    }

    /// A notice containing `text`.
    static func notice(containing text: String) -> LogMatch {
        LogMatch(matches: { if case .notice(let n, _) = $0 { n.contains(text) } else { false } },
                 description: "notice: …\(text)…")
    }
}
