/// The answer before connecting: go ahead under these requirements, or refuse the load outright.
public enum PreConnectVerdict: Sendable, Hashable, Codable {
    /// Connect, holding the connection to these requirements (for `http://`, `allowsCleartext` is true).
    case proceed(ConnectionRequirements)
    /// Refused before any traffic: an `http://`/`ws://` load to a host that needs TLS (-1022).
    case blocked(ATSViolation)

    /// The requirements when the load may proceed.
    public var requirements: ConnectionRequirements? {
        if case .proceed(let r) = self { r } else { nil }
    }

    /// The -1022 violation when the load is refused.
    public var violation: ATSViolation? {
        if case .blocked(let v) = self { v } else { nil }
    }

    /// The entry or key that decided, either way.
    public var decision: PolicyDecision? {
        switch self {
        case .proceed(let r): r.decidedBy
        case .blocked(let v): v.decidedBy
        }
    }
}

/// What the decision order (reference §2.1) concluded for one host.
struct HostDecision {
    var match: ExceptionMatch?
    /// TLS required: `http://` is refused.
    var tlsRequired: Bool
    var decision: PolicyDecision

    /// ATS minimums are applied to the connection options (src S1: `tls_required || exception != nil`).
    var appliesATS: Bool { tlsRequired || match != nil }
}

extension ATSPolicy {
    /// Pre-connect evaluation: which rules govern `target`, or the -1022 refusal for cleartext that needs TLS.
    public func requirements(for target: ConnectionTarget) -> PreConnectVerdict {
        let host = decideHost(target.host)
        if !target.isSecure && host.tlsRequired {
            return .blocked(cleartextViolation(target: target, host: host))
        }
        return .proceed(buildRequirements(target: target, host: host))
    }

    /// Applies the decision order of reference §2.1 to `host`.
    func decideHost(_ hostName: String) -> HostDecision {
        var notes = commonNotes(host: hostName)
        let ats = ["NSAppTransportSecurity"]

        // Rows 1–4: an exception entry, if any, alone decides; global keys are not consulted.
        if let match = exceptionMatch(for: hostName) {
            let entry = match.entry
            var reason: String
            switch match.how {
            case .exact: reason = "exception entry \(quote(entry.key)) matches \(hostName) exactly"
            case .parentDomain:
                reason = "exception entry \(quote(entry.key)) (NSIncludesSubdomains = YES) covers \(hostName)"
            case .cidr(let p):
                reason = "CIDR exception \(quote(entry.key)) covers \(hostName) (longest matching prefix, /\(p))"
            }
            if !match.passedOver.isEmpty {
                reason +=
                    "; \(match.passedOver.map(quote).joined(separator: ", ")) passed over (no "
                    + "NSIncludesSubdomains)"
            }
            if entry.origin == .builtIn {
                reason = "Apple's built-in " + reason
                notes.append(
                    "Built-in exceptions are read from Apple's open-source Security code "
                        + "(register_builtin_exceptions); whether CFNetwork registers the same list is unconfirmed.")
            }
            reason += ". It replaces every global key for this host: \(entry.settingsSummary)"
            if !entry.allowsInsecureHTTPLoads {
                reason +=
                    localNetworkReason(for: hostName) != nil
                    ? "; TLS required even though the host is local" : "; TLS required"
            } else {
                reason += "; cleartext allowed"
            }
            if entry.minimumTLSVersion.map({ $0 < .tls12 }) == true && profile >= .ios26 {
                notes.append(
                    "iOS 26 refuses TLS 1.0/1.1 even with NSExceptionMinimumTLSVersion (reported by OWASP MASTG, "
                        + "not by Apple's documentation); offered versions start at TLS 1.2.")
            }
            return HostDecision(
                match: match, tlsRequired: !entry.allowsInsecureHTTPLoads,
                decision: PolicyDecision(keyPath: entry.keyPath, reason: reason + ".", notes: notes))
        }

        // Row 5: local hosts are exempt unless NSAllowsLocalNetworking is explicitly NO.
        var removedLocal = ""
        if let why = localNetworkReason(for: hostName) {
            if allowsLocalNetworking != false {
                let byKey = allowsLocalNetworking == true
                return HostDecision(
                    match: nil, tlsRequired: false,
                    decision: PolicyDecision(
                        keyPath: byKey ? ats + [ATSKey.allowsLocalNetworking.rawValue] : [],
                        reason: "\(hostName) is \(why), which ATS exempts "
                            + (byKey ? "(NSAllowsLocalNetworking = YES) " : "by default ")
                            + "on \(profile); no exception entry matches, so ATS does not apply.",
                        notes: notes))
            }
            removedLocal = "\(hostName) is \(why), but NSAllowsLocalNetworking = NO removes the local exemption; "
        }
        if profile < .ios10,
            IPAddress(hostName) != nil || !hostName.contains(".") || hostName.lowercased().hasSuffix(".local")
        {
            removedLocal = "on iOS 9 ATS applies to local hosts too (IP literals, .local and unqualified names); "
        }

        // Rows 6–7: the global keys.
        let global = globalDecision()
        return HostDecision(
            match: nil, tlsRequired: global.tlsRequired,
            decision: PolicyDecision(
                keyPath: global.keyPath,
                reason: removedLocal + "no exception entry matches \(hostName); "
                    + global.reason, notes: notes))
    }

    /// `sec_protocol_configuration_tls_required` (src S1): the global keys for a host no entry covers.
    private func globalDecision() -> (tlsRequired: Bool, keyPath: [String], reason: String) {
        let ats = ["NSAppTransportSecurity"]
        // Row 6: the web/media relaxations exist only for WebKit and AVFoundation loads.
        if allowsArbitraryLoadsForMedia == true && options.client == .media {
            return (
                false, ats + [ATSKey.allowsArbitraryLoadsForMedia.rawValue],
                "NSAllowsArbitraryLoadsForMedia = YES exempts AVFoundation media loads."
            )
        }
        if allowsArbitraryLoadsInWebContent == true && options.client == .webView {
            return (
                false, ats + [ATSKey.allowsArbitraryLoadsInWebContent.rawValue],
                "NSAllowsArbitraryLoadsInWebContent = YES exempts WKWebView loads."
            )
        }
        var clientNote = ""
        if allowsArbitraryLoadsInWebContent == true && options.client != .webView {
            clientNote +=
                " NSAllowsArbitraryLoadsInWebContent applies to WKWebView only, not to \(options.client.label)."
        }
        if allowsArbitraryLoadsForMedia == true && options.client != .media {
            clientNote +=
                " NSAllowsArbitraryLoadsForMedia applies to AVFoundation media only, not to \(options.client.label)."
        }
        // Row 7 (iOS 10+): any of these keys present, YES or NO, silences NSAllowsArbitraryLoads.
        let silencers: [(ATSKey, Bool?)] = [
            (.allowsLocalNetworking, allowsLocalNetworking),
            (.allowsArbitraryLoadsInWebContent, allowsArbitraryLoadsInWebContent),
            (.allowsArbitraryLoadsForMedia, allowsArbitraryLoadsForMedia),
        ]
        let present = silencers.filter { $0.1 != nil }.map(\.0)
        if !present.isEmpty {
            let names = present.map(\.rawValue).joined(separator: ", ")
            let ignored =
                allowsArbitraryLoads == true
                ? "NSAllowsArbitraryLoads = YES is ignored because \(names) is present (iOS 10+), so "
                : "\(names) is present, so "
            return (true, ats + [present[0].rawValue], ignored + "full ATS applies." + clientNote)
        }
        if allowsArbitraryLoads == true {
            return (
                false, ats + [ATSKey.allowsArbitraryLoads.rawValue],
                "NSAllowsArbitraryLoads = YES turns ATS off for hosts without an entry; default trust "
                    + "still applies to HTTPS." + clientNote
            )
        }
        let base =
            isDeclared
            ? "no global key relaxes ATS, so full ATS applies (TLS 1.2+, forward secrecy, ATS certificate rules)."
            : "the app declares no NSAppTransportSecurity, so full ATS applies (TLS 1.2+, forward secrecy, ATS "
                + "certificate rules)."
        return (true, [], base + clientNote)
    }

    /// Notes on unconfirmed readings that bear on this host.
    private func commonNotes(host: String) -> [String] {
        var notes: [String] = []
        if let address = IPAddress(host), profile >= .ios17, address.isPrivate {
            notes.append(
                options.privateAddressesAreLocal
                    ? "Private addresses count as local on \(profile) by the chosen reading; Apple's exact rule "
                        + "(libnetwork's \"direct\" flag) is unconfirmed."
                    : "Private (RFC 1918 / unique-local) addresses are not counted as local on \(profile); "
                        + "Apple's exact rule (libnetwork's \"direct\" flag) is unconfirmed.")
        }
        if let entry = exceptionMatch(for: host)?.entry, !entry.honouredLegacyKeys.isEmpty {
            notes.append(
                "Legacy keys \(entry.honouredLegacyKeys.joined(separator: ", ")) honoured (reading: "
                    + "\(options.legacyKeys.rawValue)); whether iOS still reads them is unconfirmed.")
        }
        return notes
    }

    /// Builds the requirements of a connection the decision order lets through.
    func buildRequirements(target: ConnectionTarget, host: HostDecision) -> ConnectionRequirements {
        var notes = host.decision.notes
        let entry = host.match?.entry
        let era = profile.cipherSuiteEra
        let stack = profile.stackVersions
        let atsEnforced: Bool
        let minimum: TLSVersion
        let forwardSecrecy: Bool
        let suites: [CipherSuite]?
        if host.appliesATS {
            // ATS minimums first, then the entry's relaxations (src S1 `copy_transformed_options_for_host`).
            atsEnforced = !(entry?.allowsInsecureHTTPLoads ?? false)
            minimum = entry?.minimumTLSVersion ?? .tls12
            forwardSecrecy = entry?.requiresForwardSecrecy ?? true
            if forwardSecrecy {
                suites = CipherSuite.atsGroup(era)
            } else if atsEnforced {
                suites = CipherSuite.compatibilityGroup(era) + CipherSuite.atsGroup(era)
            } else {
                // Insecure HTTP allowed and no PFS: Apple sets no ATS list; the stack's own default applies.
                suites = nil
            }
        } else {
            atsEnforced = false
            minimum = stack[0]
            forwardSecrecy = false
            suites = nil
        }
        if profile.hasIOS13TrustRules && target.isSecure {
            notes.append(
                options.userRootEKU == .sourceLenient
                    ? "Missing serverAuth EKU under a user-installed root is accepted when the leaf has no EKU "
                        + "extension, as Apple's open-source trust code does; \(AppleDocuments.trustedCertificates) "
                        + "would reject it."
                    : "serverAuth EKU is required even under a user-installed root, as "
                        + "\(AppleDocuments.trustedCertificates) says; Apple's open-source trust code skips that "
                        + "check.")
        }
        if entry?.requiresCertificateTransparency == true && target.isSecure {
            notes.append(
                "NSRequiresCertificateTransparency is obsolete; it is simulated as \"at least 2 embedded "
                    + "SCTs for system-trusted chains\" — whether current iOS enforces it is unconfirmed."
            )
        }
        if suites != nil && target.isSecure {
            notes.append(
                "Cipher list: \(era.label)"
                    + (era == .current ? "; matching a live ClientHello capture is unconfirmed." : "."))
        }
        let rules = CertificateRules.forConnection(
            profile: profile, atsEnforced: atsEnforced, requiresCT: entry?.requiresCertificateTransparency ?? false,
            options: options)
        var decision = host.decision
        decision.notes = notes
        return ConnectionRequirements(
            target: target, profile: profile, allowsCleartext: !host.tlsRequired, atsEnforced: atsEnforced,
            minimumTLSVersion: minimum, offeredVersions: stack.filter { $0 >= minimum },
            requiresForwardSecrecy: forwardSecrecy, offeredCipherSuites: suites, certificateRules: rules,
            pins: pinSet(for: target.host), decidedBy: decision)
    }

    private func cleartextViolation(target: ConnectionTarget, host: HostDecision) -> ATSViolation {
        let codes = ViolationKind.cleartextNotAllowed.errorCodes(on: profile)
        let fix = fixFor(
            host: target.host, match: host.match,
            adding: [FixKey(key: ATSKey.exceptionAllowsInsecureHTTPLoads.rawValue, value: .bool(true))])
        return ATSViolation(
            kind: .cleartextNotAllowed, urlError: codes.urlError, sslError: codes.sslError,
            // What is wrong, not what was done about it: --ats annotate relays the load that the app refuses.
            explanation: "cleartext \(target.scheme):// load of \(target.host): ATS requires a secure connection to "
                + "this host",
            fix: fix, notes: host.decision.notes, decidedBy: host.decision)
    }

    /// The narrowest fix: set `keys` on an entry for exactly `host`. When a parent or CIDR entry governs today, the
    /// new exact entry replaces it for this host, so its settings are carried over.
    func fixFor(host: String, match: ExceptionMatch?, adding keys: [FixKey]) -> ExceptionFix {
        if IPAddress(host) != nil && profile < .ios17 {
            return .noExceptionCanHelp(
                reason: "before iOS 17 NSExceptionDomains cannot name an IP address; only "
                    + "NSAllowsArbitraryLoads = YES at the top level relaxes ATS for \(host)")
        }
        var merged: [FixKey] = []
        if let m = match {
            merged =
                m.how == .exact
                ? m.entry.effectiveKeys
                : m.entry.effectiveKeys.filter { $0.key != ATSKey.includesSubdomains.rawValue }
        }
        for k in keys {
            if let i = merged.firstIndex(where: { $0.key == k.key }) { merged[i] = k } else { merged.append(k) }
        }
        return .setKeys(domain: host, keys: merged)
    }

    private func quote(_ s: String) -> String { "`\(s)`" }
}

extension ClientKind {
    var label: String {
        switch self {
        case .urlSession: "URLSession"
        case .webView: "WKWebView"
        case .media: "AVFoundation"
        }
    }
}

extension CipherSuiteEra {
    var label: String {
        switch self {
        case .doc2015: "Apple's 2015 ATS list"
        case .src2020: "Security-59306…60157 (Apple's open-source Security code)"
        case .current: "Security-60158 onwards (Apple's open-source Security code)"
        }
    }
}
