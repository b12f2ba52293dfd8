import FoundationEssentials

extension ATSPolicy {
    /// Post-handshake evaluation: would the app accept this connection, and if not, every reason with the error
    /// it would see and the narrowest fix (reference §3, §4.4).
    ///
    /// A failed handshake (`facts.failure`) is explained from `facts.serverCapabilities` when a permissive probe
    /// ran (server speaks only TLS 1.0 → version violation; only static RSA → cipher violation).
    public func evaluate(_ facts: HandshakeFacts, against req: ConnectionRequirements) -> ATSVerdict {
        let context = EvaluationContext(policy: self, req: req)
        // A handshake that failed before any certificate arrived (not TLS, closed, timed out) has nothing to
        // judge: an empty chain would otherwise read as an invalid one and hide the real failure.
        let sawNoCertificate = facts.failure != nil && facts.chain.isEmpty
        let certificateIssues = sawNoCertificate ? [] : context.certificateViolations(facts)
        var protocolIssues: [ATSViolation] = []
        if let failure = facts.failure {
            protocolIssues = facts.serverCapabilities.map(context.probeViolations) ?? []
            if failure == .timedOut {
                // The app's load fails with the timeout whatever the probe explains, so it comes first.
                protocolIssues.insert(contentsOf: context.failureViolations(failure), at: 0)
            } else if protocolIssues.isEmpty && certificateIssues.isEmpty {
                // A handshake our own verifier aborted is fully explained by its certificate findings.
                protocolIssues = context.failureViolations(failure)
            }
        } else {
            protocolIssues = context.negotiatedViolations(facts)
        }
        let all = protocolIssues + certificateIssues
        return all.isEmpty ? .allowed : .blocked(all)
    }

    /// Judges only what a ServerHello shows, the negotiated version and cipher suite: for connections the proxy
    /// watches without terminating (tunnels), where the certificate may be encrypted (TLS 1.3) and is not checked.
    /// `versionSubject` words what the version is in a violation's explanation ("server negotiated TLSv1.0"); `date`
    /// is when the hellos were seen (the caller's clock).
    public func evaluateNegotiation(
        version: TLSVersion?, cipherSuiteCode: UInt16?, against req: ConnectionRequirements,
        versionSubject: String? = nil, at date: Date = Date()
    ) -> [ATSViolation] {
        let facts = HandshakeFacts(
            version: version, cipherSuiteCode: cipherSuiteCode, cipherSuiteName: nil, keyExchangeGroup: nil,
            alpn: nil, chain: [], trust: .untrusted(.noCertificate), hostnameMatches: false, observedAt: date)
        return EvaluationContext(policy: self, req: req).negotiatedViolations(facts, versionSubject: versionSubject)
    }
}

/// Shared state for one evaluation.
struct EvaluationContext {
    let policy: ATSPolicy
    let req: ConnectionRequirements
    let match: ExceptionMatch?

    init(policy: ATSPolicy, req: ConnectionRequirements) {
        self.policy = policy
        self.req = req
        self.match = policy.exceptionMatch(for: req.target.host)
    }

    var profile: IOSProfile { req.profile }
    var host: String { req.target.host }
    /// `host:port` as `openssl s_client -connect` takes it, an IPv6 literal in brackets.
    var hostAndPort: String { host.contains(":") ? "[\(host)]:\(req.target.port)" : "\(host):\(req.target.port)" }

    func violation(
        _ kind: ViolationKind, _ explanation: String, fix: ExceptionFix, certificate: Int? = nil,
        notes: [String] = [], ssl: SSLErrorCode? = nil
    ) -> ATSViolation {
        let codes = kind.errorCodes(on: profile)
        return ATSViolation(
            kind: kind, urlError: codes.urlError, sslError: ssl ?? codes.sslError, explanation: explanation, fix: fix,
            certificateIndex: certificate, notes: (codes.note.map { [$0] } ?? []) + notes)
    }

    func fix(_ key: ATSKey, _ value: PlistValue) -> ExceptionFix {
        policy.fixFor(host: host, match: match, adding: [FixKey(key: key.rawValue, value: value)])
    }

    // MARK: Protocol

    /// Version and suite of a completed handshake against what ATS allows.
    func negotiatedViolations(_ facts: HandshakeFacts, versionSubject: String? = nil) -> [ATSViolation] {
        var out: [ATSViolation] = []
        if let version = facts.version {
            let subject = versionSubject ?? "server negotiated \(version.plistName)"
            if let v = versionViolation(version, subject: subject) { out.append(v) }
        }
        if let code = facts.cipherSuiteCode, let offered = req.offeredCipherSuites,
            !offered.contains(where: { $0.code == code })
        {
            let suite = CipherSuite.lookup(code: code)
            let name = suite?.ianaName ?? facts.cipherSuiteName ?? hex(code)
            if let suite, !suite.isForwardSecret, req.requiresForwardSecrecy {
                out.append(
                    violation(
                        .cipherSuiteNotAllowed,
                        "server negotiated \(name), which has no forward secrecy; ATS requires an ECDHE suite",
                        fix: fix(.exceptionRequiresForwardSecrecy, .bool(false))))
            } else {
                out.append(
                    violation(
                        .cipherSuiteNotAllowed,
                        "server negotiated \(name), which \(profile) never offers under ATS",
                        fix: .noExceptionCanHelp(
                            reason: "no ATS key adds \(name) to the offered list; the server must support one of the "
                                + "ATS suites (ECDHE with AES-GCM, ChaCha20 or AES-CBC)")))
            }
        }
        return out
    }

    /// A version problem: `version` is the negotiated version, or the best one the server supports; `subject`
    /// says which, in words.
    func versionViolation(_ version: TLSVersion, subject: String) -> ATSViolation? {
        if version < .tls12 && profile >= .ios26 {
            return violation(
                .tlsVersionRefusedByOS,
                "\(subject); \(profile) requires TLS 1.2 or later even with an exception",
                fix: .noExceptionCanHelp(
                    reason: "\(profile) refuses TLS 1.0/1.1 for URLSession whatever NSExceptionMinimumTLSVersion says; "
                        + "the server must support TLS 1.2"))
        }
        if version < req.minimumTLSVersion {
            return violation(
                .tlsVersionTooLow,
                "\(subject); ATS requires \(req.minimumTLSVersion.plistName) or later",
                fix: fix(.exceptionMinimumTLSVersion, .string(version.plistName)))
        }
        return nil
    }

    /// Why a handshake failed, from what the permissive probe found the server supports; empty when the probe
    /// does not explain it.
    func probeViolations(_ caps: ServerCapabilities) -> [ATSViolation] {
        var out: [ATSViolation] = []
        if let best = caps.supportedVersions.max() {
            let usable = caps.supportedVersions.filter { req.offeredVersions.contains($0) }
            if usable.isEmpty {
                let list = caps.supportedVersions.sorted().map(\.plistName).joined(separator: ", ")
                if let v = versionViolation(best, subject: "server supports only \(list)") {
                    out.append(v)
                } else {
                    out.append(
                        violation(
                            .noSharedCipherOrVersion,
                            "server supports only \(list); \(profile) offers "
                                + req.offeredVersions.map(\.plistName).joined(separator: ", "),
                            fix: .noExceptionCanHelp(reason: "\(profile) cannot speak \(list)")))
                }
            }
            if req.requiresForwardSecrecy && !caps.supportsForwardSecrecy {
                let preferred = caps.preferredCipherName.map { " (it chose \($0))" } ?? ""
                out.append(
                    violation(
                        .cipherSuiteNotAllowed,
                        "server offers only suites without forward secrecy\(preferred); ATS requires ECDHE key "
                            + "exchange",
                        fix: fix(.exceptionRequiresForwardSecrecy, .bool(false))))
            } else if out.isEmpty, let code = caps.preferredCipherCode, let offered = req.offeredCipherSuites,
                !offered.contains(where: { $0.code == code })
            {
                let name = CipherSuite.lookup(code: code)?.ianaName ?? caps.preferredCipherName ?? hex(code)
                out.append(
                    violation(
                        .cipherSuiteNotAllowed,
                        "server's preferred suite \(name) is not among the suites \(profile) offers under ATS "
                            + "(the likely cause)",
                        fix: .noExceptionCanHelp(
                            reason: "no ATS key makes iOS offer \(name); the server must enable an ATS suite")))
            }
        }
        return out
    }

    /// A failed handshake the probe could not explain: what the failure itself says.
    func failureViolations(_ failure: HandshakeFailure) -> [ATSViolation] {
        switch failure {
        case .notTLS:
            return [
                violation(
                    .notTLS,
                    "the server on port \(req.target.port) answered the TLS ClientHello with bytes that are not TLS "
                        + "(plain HTTP, for example)",
                    fix: .noExceptionCanHelp(
                        reason: "the server does not speak TLS on port \(req.target.port); point the URL at the port "
                            + "that serves HTTPS, or enable TLS on this one"))
            ]
        case .closedDuringHandshake:
            return [
                violation(
                    .connectionFailed, "the server closed the connection during the TLS handshake",
                    fix: .noExceptionCanHelp(
                        reason: "the server closed the connection during the TLS handshake; check that it serves TLS "
                            + "on port \(req.target.port), e.g. `openssl s_client -connect \(hostAndPort)`"))
            ]
        case .timedOut:
            return [
                violation(
                    .timedOut,
                    "the server accepted the connection but did not complete the TLS handshake in time",
                    fix: .noExceptionCanHelp(
                        reason: "the server never finished the handshake; check that it serves TLS on port "
                            + "\(req.target.port) and that nothing in the path drops the ClientHello"))
            ]
        case .alertReceived(let alert):
            return [alertViolation(alert)]
        case .localError(let message):
            return [
                violation(
                    .noSharedCipherOrVersion, "the handshake failed on the client side: \(message)",
                    fix: broadTLSFix(),
                    notes: [
                        "No probe of the server ran; the fix is the broadest TLS relaxation and "
                            + "may be more than needed."
                    ])
            ]
        }
    }

    /// A server alert during the handshake. Modern stacks report the peer alert as errSSLPeer… (reference §4.1).
    private func alertViolation(_ alert: UInt8) -> ATSViolation {
        let name = tlsAlertName(alert)
        let ssl: SSLErrorCode? =
            profile >= .ios14
            ? (alert == 70
                ? SSLErrorCode(-9836) : alert == 40 ? SSLErrorCode(-9824) : alert == 71 ? SSLErrorCode(-9837) : nil)
            : nil
        let hint: String
        switch alert {
        case 70:
            hint =
                "the server does not accept the offered TLS versions ("
                + req.offeredVersions.map(\.plistName).joined(separator: ", ") + ")"
        case 40, 71: hint = "the server shares no acceptable cipher suite or version with the client"
        default: hint = "the handshake was refused"
        }
        return violation(
            .noSharedCipherOrVersion, "server sent alert \(name) (\(alert)): \(hint)", fix: broadTLSFix(),
            notes: ["No probe of the server ran; the fix is the broadest TLS relaxation and may be more than needed."],
            ssl: ssl)
    }

    /// Lower the TLS minimum and drop forward secrecy: the widest a per-host exception can go.
    private func broadTLSFix() -> ExceptionFix {
        var keys = [FixKey(key: ATSKey.exceptionRequiresForwardSecrecy.rawValue, value: .bool(false))]
        if profile < .ios26 {
            keys.insert(
                FixKey(key: ATSKey.exceptionMinimumTLSVersion.rawValue, value: .string(TLSVersion.tls10.plistName)),
                at: 0)
        }
        return policy.fixFor(host: host, match: match, adding: keys)
    }

    private func tlsAlertName(_ alert: UInt8) -> String {
        switch alert {
        case 10: "unexpected_message"
        case 20: "bad_record_mac"
        case 40: "handshake_failure"
        case 42: "bad_certificate"
        case 47: "illegal_parameter"
        case 48: "unknown_ca"
        case 50: "decode_error"
        case 70: "protocol_version"
        case 71: "insufficient_security"
        case 80: "internal_error"
        case 86: "inappropriate_fallback"
        case 112: "unrecognized_name"
        default: "alert"
        }
    }
}

/// `0x00FF`-style code for a suite no table names.
private func hex(_ code: UInt16) -> String {
    let digits = String(code, radix: 16, uppercase: true)
    return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
