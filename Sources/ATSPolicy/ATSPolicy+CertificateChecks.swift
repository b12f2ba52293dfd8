import FoundationEssentials

/// Dates the certificate rules turn on (reference §3.3–§3.5).
enum CertificateRuleDates {
    /// 2018-03-01: system-trusted leaves from here on are limited to 825 days.
    static let systemLimit825 = Date(timeIntervalSince1970: 1_519_862_400)
    /// "1 July 2019" in Apple's code is 2019-06-30 23:00 UTC (reference §3.3).
    static let july2019 = Date(timeIntervalSince1970: 1_561_935_600)
    /// 2020-09-01: system-trusted leaves from here on are limited to 398 days.
    static let systemLimit398 = Date(timeIntervalSince1970: 1_598_918_400)
    static let day: Double = 86_400
    static let hour: Double = 3_600
}

extension EvaluationContext {
    /// Trust, name, key, hash, EKU, lifetime, CT and pin findings for the served chain.
    func certificateViolations(_ facts: HandshakeFacts) -> [ATSViolation] {
        var out: [ATSViolation] = []
        let rules = req.certificateRules
        let userAnchored = facts.trust == .trustedByUserRoot

        if case .untrusted(let failure) = facts.trust {
            out.append(trustViolation(failure, facts: facts))
        }
        if !facts.chain.isEmpty && !facts.hostnameMatches {
            let leaf = facts.chain[0]
            let names = (leaf.dnsNames + leaf.ipAddresses)
            let san = names.isEmpty ? "has no subjectAltName" : "names " + names.joined(separator: ", ")
            out.append(
                violation(
                    .hostnameMismatch, "certificate \(san), not \(host) (the CN is not used)",
                    fix: .noExceptionCanHelp(
                        reason:
                            "a name mismatch fails default trust, even under NSAllowsArbitraryLoads; the certificate "
                            + "must list \(host) in its subjectAltName"), certificate: 0))
        }

        for (i, cert) in facts.chain.enumerated() {
            // A self-signed certificate the user trusts is an anchor: key size and hash are not judged (src S8).
            let isAnchor = cert.isSelfSigned
            if !(isAnchor && userAnchored), let problem = weakKeyProblem(cert, rules: rules) {
                out.append(
                    violation(
                        .weakKey, "\(position(i)) has \(problem)", fix: weakCertificateFix(), certificate: i,
                        notes: weakCertificateNotes()))
            }
            if !isAnchor && rules.requiresSHA2 && !cert.signatureHash.isSHA2OrBetter && cert.signatureHash != .unknown {
                out.append(
                    violation(
                        .weakSignatureHash,
                        "\(position(i)) is signed with \(cert.signatureHash.rawValue.uppercased()); SHA-2 is required",
                        fix: weakCertificateFix(), certificate: i, notes: weakCertificateNotes()))
            }
        }

        if let leaf = facts.chain.first, !(leaf.isSelfSigned && userAnchored) {
            if rules.requiresServerAuthEKU, let v = ekuViolation(leaf, trust: facts.trust, rules: rules) {
                out.append(v)
            }
            if rules.enforcesValidityLimits,
                let v = lifetimeViolation(leaf, systemTrusted: facts.trust == .trustedBySystemRoot)
            {
                out.append(v)
            }
            if rules.requiresCertificateTransparency && facts.trust == .trustedBySystemRoot && leaf.embeddedSCTCount < 2
            {
                out.append(
                    violation(
                        .certificateTransparencyMissing,
                        "NSRequiresCertificateTransparency is set but the leaf embeds \(leaf.embeddedSCTCount) SCT(s); "
                            + "at least 2 are required",
                        fix: .noExceptionCanHelp(
                            reason: "remove the obsolete NSRequiresCertificateTransparency key, or serve a CT-logged "
                                + "certificate"), certificate: 0))
            }
        }

        if let pins = req.pins, !facts.chain.isEmpty {
            out += pinViolations(pins, chain: facts.chain)
        }
        return out
    }

    private func position(_ i: Int) -> String { i == 0 ? "the leaf certificate" : "chain certificate #\(i)" }

    private func trustViolation(_ failure: TrustFailure, facts: HandshakeFacts) -> ATSViolation {
        let delegate =
            req.allowsCleartext
            ? " Only the app's own auth-challenge delegate could accept it (NSExceptionAllowsInsecureHTTPLoads lets "
                + "it loosen trust)."
            : ""
        let issuer = facts.chain.first?.issuer ?? "an unknown issuer"
        switch failure {
        case .selfSigned:
            return violation(
                .selfSigned, "the server's certificate is self-signed and not trusted on the device",
                fix: .noExceptionCanHelp(
                    reason: "no Info.plist key makes iOS trust a self-signed certificate; install and trust it as a "
                        + "root on the device, or serve a certificate from a trusted CA.\(delegate)"), certificate: 0)
        case .unknownRoot:
            return violation(
                .untrustedRoot, "the chain (issued by \(issuer)) does not end in a root the device trusts",
                fix: .noExceptionCanHelp(
                    reason: "no Info.plist key adds a trusted root; install and trust the CA on the device, or serve "
                        + "a publicly trusted chain.\(delegate)"))
        case .expired:
            return violation(
                .expired, "a certificate in the chain has expired",
                fix: .noExceptionCanHelp(
                    reason: "renew the certificate; ATS keys cannot accept an expired one.\(delegate)"))
        case .notYetValid:
            return violation(
                .notYetValid, "a certificate in the chain is not valid yet",
                fix: .noExceptionCanHelp(
                    reason: "check the server's certificate dates and the device clock.\(delegate)"))
        case .badSignature, .invalidChain, .revoked, .noCertificate, .other:
            return violation(
                .invalidChain, "the certificate chain failed verification (\(failure.rawValue))",
                fix: .noExceptionCanHelp(reason: "serve a complete, valid chain.\(delegate)"))
        }
    }

    private func weakKeyProblem(_ cert: CertificateFacts, rules: CertificateRules) -> String? {
        switch cert.keyType {
        case .rsa where cert.keyBits < rules.minimumRSABits:
            "an RSA-\(cert.keyBits) key; at least RSA-\(rules.minimumRSABits) is required"
        case .ec where cert.keyBits < rules.minimumECBits:
            "a \(cert.keyBits)-bit EC key; at least \(rules.minimumECBits) bits (P-256) are required"
        default: nil
        }
    }

    /// iOS 13+ default trust rejects weak certificates for every TLS load; before that only ATS did, and clearing
    /// `ats_required` (NSExceptionAllowsInsecureHTTPLoads, src S1) drops the ATS certificate minimums.
    private func weakCertificateFix() -> ExceptionFix {
        if profile.hasIOS13TrustRules {
            return .noExceptionCanHelp(
                reason: "since iOS 13 default trust rejects RSA < 2048 and SHA-1 certificates for every TLS "
                    + "connection (\(AppleDocuments.trustedCertificates)); reissue the certificate")
        }
        return fix(.exceptionAllowsInsecureHTTPLoads, .bool(true))
    }

    private func weakCertificateNotes() -> [String] {
        profile.hasIOS13TrustRules
            ? []
            : [
                "Fix chosen from Apple's open-source Security code, where NSExceptionAllowsInsecureHTTPLoads "
                    + "clears the ATS certificate minimums; Apple's NSExceptionRequiresForwardSecrecy documentation "
                    + "says NSExceptionRequiresForwardSecrecy = NO also lifts the key-length check — which one iOS "
                    + "9/10 honoured is unconfirmed."
            ]
    }

    private func ekuViolation(_ leaf: CertificateFacts, trust: TrustResult, rules: CertificateRules) -> ATSViolation? {
        let ekus = leaf.extendedKeyUsages
        let allowsServerAuth =
            ekus.map { $0.contains(CertificateFacts.serverAuthOID) || $0.contains(CertificateFacts.anyEKUOID) } ?? true
        let hasServerAuth = ekus?.contains(CertificateFacts.serverAuthOID) ?? false
        let strict: Bool
        var notes: [String] = []
        switch trust {
        case .trustedBySystemRoot:
            strict = true
        case .trustedByUserRoot:
            strict = rules.requiresServerAuthEKUUnderUserRoot && leaf.notBefore >= CertificateRuleDates.july2019
            notes.append(
                rules.requiresServerAuthEKUUnderUserRoot
                    ? "Reading: serverAuth required under user roots (\(AppleDocuments.trustedCertificates)); "
                        + "Apple's open-source trust code skips it."
                    : "Reading: under a user root only a present EKU must allow serverAuth (Apple's open-source "
                        + "trust code; \(AppleDocuments.trustedCertificates) would require it).")
        case .untrusted:
            strict = leaf.notBefore >= CertificateRuleDates.july2019
        }
        if strict ? hasServerAuth : allowsServerAuth { return nil }
        let what = ekus == nil ? "has no extendedKeyUsage extension" : "has an extendedKeyUsage without serverAuth"
        return violation(
            .missingServerAuthEKU, "the leaf \(what); iOS 13+ requires id-kp-serverAuth",
            fix: .noExceptionCanHelp(reason: "reissue the certificate with extendedKeyUsage serverAuth"),
            certificate: 0, notes: notes)
    }

    private func lifetimeViolation(_ leaf: CertificateFacts, systemTrusted: Bool) -> ATSViolation? {
        let lifetime = leaf.notAfter.timeIntervalSince(leaf.notBefore)
        let days = Int((lifetime / CertificateRuleDates.day).rounded(.down))
        let limit: Int
        let slack: Double
        // Which rule applies, in words: the date it starts from and the kind of root it is for.
        let rule: String
        if systemTrusted {
            if leaf.notBefore >= CertificateRuleDates.systemLimit398 {
                (limit, slack) = (req.certificateRules.maximumValidityDaysSystemRoot, 0)
                rule = "issued from 1 September 2020 under a system root"
            } else if leaf.notBefore >= CertificateRuleDates.systemLimit825 {
                (limit, slack) = (825, CertificateRuleDates.hour)
                rule = "issued from 1 March 2018 under a system root"
            } else {
                return nil
            }
        } else {
            guard leaf.notBefore > CertificateRuleDates.july2019 else { return nil }
            (limit, slack) = (req.certificateRules.maximumValidityDaysUserRoot, CertificateRuleDates.hour)
            rule = "issued from 1 July 2019 under a user-installed root"
        }
        guard lifetime > Double(limit) * CertificateRuleDates.day + slack else { return nil }
        return violation(
            .validityTooLong,
            "the leaf is valid for \(days) days; a certificate \(rule) may be valid for at most \(limit) days",
            fix: .noExceptionCanHelp(reason: "reissue the certificate with a shorter validity (≤ \(limit) days)"),
            certificate: 0)
    }

    private func pinViolations(_ pins: PinSet, chain: [CertificateFacts]) -> [ATSViolation] {
        var out: [ATSViolation] = []
        let path = "NSPinnedDomains › \(pins.domain)"
        if !pins.leafSPKISHA256.isEmpty && !pins.leafSPKISHA256.contains(chain[0].spkiSHA256Base64) {
            out.append(
                violation(
                    .pinMismatch,
                    "the leaf's SPKI-SHA256 \(chain[0].spkiSHA256Base64) is not in \(path) › NSPinnedLeafIdentities",
                    fix: .noExceptionCanHelp(
                        reason: "pins only tighten trust and no exception loosens them; add the served key's "
                            + "SPKI-SHA256-BASE64 (\(chain[0].spkiSHA256Base64)) to NSPinnedLeafIdentities or "
                            + "remove the pin"
                    ),
                    certificate: 0))
        }
        let cas = chain.dropFirst()
        if !pins.caSPKISHA256.isEmpty && !cas.contains(where: { pins.caSPKISHA256.contains($0.spkiSHA256Base64) }) {
            let served = cas.map(\.spkiSHA256Base64)
            out.append(
                violation(
                    .pinMismatch,
                    "no CA certificate in the served chain has an SPKI-SHA256 listed in \(path) › NSPinnedCAIdentities",
                    fix: .noExceptionCanHelp(
                        reason: "pins only tighten trust; add the issuing CA's SPKI-SHA256-BASE64"
                            + (served.isEmpty ? "" : " (served: \(served.joined(separator: ", ")))")
                            + " to NSPinnedCAIdentities or remove the pin"),
                    notes: [
                        "Only CA certificates the server sends are compared; a root taken from the device store is not "
                            + "seen here."
                    ]))
        }
        return out
    }
}

extension ATSPolicy {
    /// Judges a leaf certificate minted under a user-installed root (the proxy's CA) against the rules iOS
    /// applies to it (reference §3.3 "Implications for the proxy's own minted leaf certificates"): SAN present and
    /// naming `host`, serverAuth EKU, valid at `now`, ≤ 825 days (and ≤ 398 to be safe), RSA ≥ 2048 / EC ≥ 256,
    /// SHA-2 signature. Empty when the leaf is fine. Error codes are those of `profile`.
    public static func appleRuleViolations(
        leaf: CertificateFacts, host: String, now: Date, profile: IOSProfile = .newest
    ) -> [ATSViolation] {
        var out: [ATSViolation] = []
        func add(_ kind: ViolationKind, _ text: String) {
            let codes = kind.errorCodes(on: profile)
            out.append(
                ATSViolation(
                    kind: kind, urlError: codes.urlError, sslError: codes.sslError, explanation: text,
                    fix: .noExceptionCanHelp(reason: "re-mint the leaf certificate; an app cannot relax these rules"),
                    certificateIndex: 0, notes: codes.note.map { [$0] } ?? []))
        }
        if leaf.dnsNames.isEmpty && leaf.ipAddresses.isEmpty {
            add(.hostnameMismatch, "the leaf has no subjectAltName; iOS 13+ ignores the CN")
        } else if !certificate(leaf, matchesHost: host) {
            add(.hostnameMismatch, "the leaf's subjectAltName does not name \(host)")
        }
        if !(leaf.extendedKeyUsages?.contains(CertificateFacts.serverAuthOID) ?? false) {
            add(.missingServerAuthEKU, "the leaf lacks extendedKeyUsage serverAuth")
        }
        if now < leaf.notBefore { add(.notYetValid, "the leaf is not valid until \(leaf.notBefore)") }
        if now > leaf.notAfter { add(.expired, "the leaf expired at \(leaf.notAfter)") }
        let lifetime = leaf.notAfter.timeIntervalSince(leaf.notBefore)
        if lifetime > 825 * CertificateRuleDates.day + CertificateRuleDates.hour {
            add(.validityTooLong, "the leaf is valid for more than 825 days, the limit under a user-installed root")
        } else if lifetime > 398 * CertificateRuleDates.day {
            add(
                .validityTooLong,
                "the leaf is valid for more than 398 days, the limit should the root ever count as "
                    + "system-trusted")
        }
        switch leaf.keyType {
        case .rsa where leaf.keyBits < 2048: add(.weakKey, "the leaf has an RSA-\(leaf.keyBits) key; RSA-2048+ needed")
        case .ec where leaf.keyBits < 256: add(.weakKey, "the leaf has a \(leaf.keyBits)-bit EC key; P-256+ needed")
        case .rsa, .ec: break
        default: add(.weakKey, "the leaf's \(leaf.keyType.rawValue) key is not one iOS TLS accepts; use RSA or ECDSA")
        }
        if !leaf.signatureHash.isSHA2OrBetter {
            add(.weakSignatureHash, "the leaf is signed with \(leaf.signatureHash.rawValue.uppercased()); SHA-2 needed")
        }
        return out
    }

    /// Whether the leaf's subjectAltName covers `host`: IP hosts against iPAddress entries, names against dNSName
    /// entries case-insensitively, a `*.` wildcard standing for exactly one leftmost label. The CN is not used
    /// (iOS 13+, reference §3.3).
    public static func certificate(_ leaf: CertificateFacts, matchesHost host: String) -> Bool {
        if let address = IPAddress(host) {
            return leaf.ipAddresses.contains { IPAddress($0) == address }
        }
        var name = host.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        return leaf.dnsNames.contains { pattern in
            var p = pattern.lowercased()
            if p.hasSuffix(".") { p.removeLast() }
            if p == name { return true }
            guard p.hasPrefix("*."), let dot = name.firstIndex(of: ".") else { return false }
            let rest = name[name.index(after: dot)...]
            return !name[..<dot].isEmpty && String(rest) == String(p.dropFirst(2)) && rest.contains(".")
        }
    }
}
