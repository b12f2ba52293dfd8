import ATSPolicy

/// The records ATSProxy writes for one exchange, in the order a URLSession load produces them
/// (reference §5.2 record table). `ATS Decision` and `TLS Handshake` are ATSProxy's own records: CFNetwork has
/// no equivalent, but they say what the app's stack decided and why.
extension DiagnosticsRecord {
    /// `LoaderWhatToDo`: the load is about to start (or is refused before any connection, for -1022).
    public static func loaderWhatToDo(method: String, url: String, whatToDo: String = "originload") -> Self {
        DiagnosticsRecord(
            title: "LoaderWhatToDo",
            fields: [.init("Request", "<CFURLRequest> {url = \(url), method = \(method)}"), .init("WhatToDo", whatToDo)])
    }

    /// `TCP Connection Start`. A connection's later attempts (the proxy's probe after a failed handshake, a retry
    /// with another ALPN offer) are new TCP connections too: they say `Attempt: N` and why, as the app's load
    /// makes only the first.
    public static func tcpConnectionStart(
        connectionID: UInt64, host: String, port: Int, attempt: Int = 1, reason: String? = nil, mappedTo: String? = nil
    ) -> Self {
        var fields: [Field] = [
            .init("Connection", "0x\(String(connectionID, radix: 16))"), .init("Connection ID", String(connectionID)),
            .init("Host", "\(host):\(port)"),
        ]
        // The app would connect to the host itself; ATSProxy connects where --map sends it.
        if let mappedTo { fields.append(.init("Mapped To", mappedTo)) }
        if attempt > 1 { fields.append(.init("Attempt", String(attempt))) }
        if let reason { fields.append(.init("Reason", reason)) }
        return DiagnosticsRecord(title: "TCP Connection Start", fields: fields)
    }

    /// `TCP Connection Connected`, with `Attempt: N` for a later attempt, as its start record.
    public static func tcpConnectionConnected(connectionID: UInt64, error: String? = nil, attempt: Int = 1) -> Self {
        var fields: [Field] = [
            .init("Connection", "0x\(String(connectionID, radix: 16))"), .init("Connection ID", String(connectionID)),
            .init("Error", error ?? "(null)"),
        ]
        if attempt > 1 { fields.append(.init("Attempt", String(attempt))) }
        return DiagnosticsRecord(title: "TCP Connection Connected", fields: fields)
    }

    /// ATSProxy's record of the upstream TLS handshake as the simulated iOS client saw it. `resumed`: the handshake
    /// resumed an earlier session, so the certificates shown are those of the handshake that established it.
    public static func tlsHandshake(connectionID: UInt64, facts: HandshakeFacts, resumed: Bool = false) -> Self {
        var fields: [Field] = [.init("Connection ID", String(connectionID))]
        if let failure = facts.failure {
            fields.append(.init("Result", "failed (\(failure))"))
        } else {
            fields.append(.init("Result", "connected"))
            fields.append(.init(
                "Session", resumed ? "resumed (certificates as the session's full handshake received them)" : "full handshake"))
        }
        if facts.failure != nil, facts.serverCapabilities != nil, facts.version != nil {
            // What follows is not the app's handshake, which failed, but the one ATSProxy's probe made.
            fields.append(.init("Probe", "ATSProxy offered every version and suite to learn what the server supports"))
        }
        // Level 1: the summary (result, session, version, protocol, trust); level 2 adds the details (suite, group,
        // certificates), as CFNetwork's level 2.
        if let v = facts.version { fields.append(.init("Protocol", v.plistName)) }
        if let name = facts.cipherSuiteName {
            let code = facts.cipherSuiteCode.map { " (0x" + String($0, radix: 16, uppercase: true) + ")" } ?? ""
            fields.append(.init("Cipher Suite", name + code, level: 2))
        }
        if let g = facts.keyExchangeGroup { fields.append(.init("Group", g, level: 2)) }
        fields.append(.init("ALPN", facts.alpn ?? "(none)"))
        for (i, cert) in facts.chain.enumerated() {
            fields.append(.init("Certificate \(i)",
                "\(cert.subject); \(cert.keyType.rawValue.uppercased())-\(cert.keyBits); \(cert.signatureHash.rawValue.uppercased())",
                level: 2))
        }
        fields.append(.init("Trust", String(describing: facts.trust)))
        fields.append(.init("Host Match", facts.hostnameMatches ? "yes" : "no"))
        return DiagnosticsRecord(title: "TLS Handshake", fields: fields)
    }

    /// ATSProxy's record of the ATS decision: which entry decided, and every violation with its error.
    public static func atsDecision(
        url: String, decision: PolicyDecision, violations: [ATSViolation], action: String
    ) -> Self {
        var fields: [Field] = [
            .init("URL", url), .init("Rule", decision.keyPath.isEmpty ? "(ATS defaults)" : decision.keyPathString),
            .init("Reason", decision.reason),
            .init("Verdict", violations.isEmpty ? "allowed" : "violates ATS"), .init("Action", action),
        ]
        for v in violations {
            let ssl = v.sslError.map { ", \($0.code) \($0.name)" } ?? ""
            fields.append(.init("Violation", "\(v.urlError.code) \(v.urlError.name)\(ssl): \(v.explanation)"))
        }
        return DiagnosticsRecord(title: "ATS Decision", fields: fields)
    }

    /// `Mirror Device Verdict`: what `--ats mirror` showed the device on a connection and what the device did.
    public static func mirrorDeviceVerdict(url: String, record: MirrorRecord) -> Self {
        var fields: [Field] = [.init("URL", url), .init("Shown", record.consoleText)]
        if record.deviceAccepted {
            fields.append(.init("Device", "accepted \(record.deviceVersion ?? "") \(record.deviceCipherSuite ?? "")"))
        } else {
            fields.append(.init("Device", "refused (\(record.refusal ?? "closed")): \(record.refusalStep ?? "")"))
        }
        for item in record.notReproduced { fields.append(.init("Not reproduced", item)) }
        if let simulated = record.simulated { fields.append(.init("Simulated", simulated)) }
        if let disagreement = record.disagreement { fields.append(.init("Disagreement", disagreement)) }
        return DiagnosticsRecord(title: "Mirror Device Verdict", fields: fields)
    }

    /// `Protocol Enqueue: request GET <url> HTTP/1.1` with, at level 2, the request headers (nil: not built).
    public static func protocolEnqueue(
        method: String, url: String, httpVersion: String, headers: [(String, String)]?
    ) -> Self {
        var fields: [Field] = [
            .init("Request", "<CFURLRequest> {url = \(url)}"), .init("Message", "\(method) \(url) \(httpVersion)"),
        ]
        if let headers {
            let sending = headers.map { "\($0.0): \(Redaction.headerValue(name: $0.0, value: $0.1))" }
                .joined(separator: "\n")
            fields.append(.init("Sending", sending.isEmpty ? "(none)" : sending, level: 2))
        }
        return DiagnosticsRecord(
            title: "Protocol Enqueue", subject: "request \(method) \(url) \(httpVersion)", fields: fields)
    }

    /// `Protocol Received: request GET <url>` with `Response: HTTP/2.0 200` and, at level 2, the response headers
    /// as the client got them (when the exchange recorded them).
    public static func protocolReceived(
        method: String, url: String, httpVersion: String, status: Int, headers: [(String, String)]? = nil
    ) -> Self {
        var fields: [Field] = [.init("Response", "\(httpVersion) \(status)")]
        if let headers {
            let received = headers.map { "\($0.0): \(Redaction.headerValue(name: $0.0, value: $0.1))" }
                .joined(separator: "\n")
            fields.append(.init("Received", received.isEmpty ? "(none)" : received, level: 2))
        }
        return DiagnosticsRecord(title: "Protocol Received", subject: "request \(method) \(url)", fields: fields)
    }

    /// `Response Error` with the full error the app's task would complete with.
    public static func responseError(url: String, error: NSErrorDescription) -> Self {
        DiagnosticsRecord(
            title: "Response Error",
            fields: [.init("Request", "<CFURLRequest> {url = \(url)}"), .init("Error", error.description)])
    }

    /// A failure a rule injected on purpose (`--fault`, `--block-list`): which rules, and what the client was
    /// shown, so the records that follow are never read as the server's.
    public static func injectedFailure(url: String, rules: [AppliedRule], what: String) -> Self {
        DiagnosticsRecord(
            title: "Injected Failure",
            fields: [.init("URL", url), .init("Rule", rules.map(\.summary).joined(separator: "; ")),
                     .init("What", what), .init("Upstream", "not contacted")])
    }

    public static func didFinish(totalMilliseconds: Double, totalBytes: Int) -> Self {
        DiagnosticsRecord(
            title: "Did Finish",
            fields: [.init("init to origin load", formatSeconds(totalMilliseconds)),
                     .init("total time", formatSeconds(totalMilliseconds)), .init("total bytes", String(totalBytes))])
    }

    public static func didFail(totalMilliseconds: Double, error: NSErrorDescription) -> Self {
        DiagnosticsRecord(
            title: "Did Fail",
            fields: [.init("Error", error.description), .init("total time", formatSeconds(totalMilliseconds))])
    }

    /// Level 3: a hex dump of bytes read from or written to a connection (`SSL-READ (n) | < 00000000: …`).
    public static func hexDump(connectionID: UInt64, read: Bool, bytes: [UInt8], limit: Int = 4096) -> Self {
        let label = read ? "SSL-READ" : "SSL-WRITE"
        let arrow = read ? "<" : ">"
        let shown = bytes.prefix(limit)
        var lines: [String] = []
        var offset = 0
        while offset < shown.count {
            let row = shown[shown.startIndex + offset ..< shown.startIndex + min(offset + 16, shown.count)]
            let hex = row.map { b in (b < 16 ? "0" : "") + String(b, radix: 16) }.joined(separator: " ")
            let ascii = String(row.map { (0x20...0x7e).contains($0) ? Character(UnicodeScalar($0)) : "." })
            let off = String(offset, radix: 16)
            lines.append("\(arrow) " + String(repeating: "0", count: 8 - off.count) + off + ": "
                + hex.padding(toLength: 47) + "  " + ascii)
            offset += 16
        }
        if bytes.count > limit { lines.append("… \(bytes.count - limit) more bytes") }
        return DiagnosticsRecord(
            title: "\(label) (\(connectionID))", subject: "\(bytes.count) bytes",
            fields: [.init("Data", lines.joined(separator: "\n"))], level: 3)
    }

    private static func formatSeconds(_ ms: Double) -> String {
        let tenths = Int((ms * 10).rounded())
        return "\(tenths / 10000).\(String(repeating: "0", count: 4 - String(tenths % 10000).count))\(tenths % 10000)s"
    }
}

extension String {
    fileprivate func padding(toLength n: Int) -> String {
        count >= n ? self : self + String(repeating: " ", count: n - count)
    }
}
