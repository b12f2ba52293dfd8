import ATSPolicy

/// `NSPinnedDomains` (reference §1.3).
extension Linter {
    mutating func lintPinnedDomains(_ pins: PlistDictionary, _ base: [String]) {
        checkCaseDuplicates(pins.keys, base, pinned: true)
        for (host, value) in pins {
            let path = base + [host]
            _ = checkDomainKey(host, path, pinned: true)
            guard case .dictionary(let entry) = value else {
                add(
                    .wrongType, path,
                    "the pinned entry for \(host) is \(article(value.typeName)) \(value.typeName), not a Dictionary; "
                        + "ATS skips it, so nothing is pinned for \(host)",
                    fix: "make the \(host) entry a <dict> with NSPinnedCAIdentities or NSPinnedLeafIdentities")
                continue
            }
            var pinArrays = 0
            for (key, v) in entry {
                let keyPath = path + [key]
                guard let k = ATSKey(rawValue: key) else {
                    unknownKey(key, at: .pinnedDomain, keyPath)
                    continue
                }
                guard k.levels.contains(.pinnedDomain) else {
                    misplaced(k, at: .pinnedDomain, keyPath)
                    continue
                }
                guard checkType(k, v, keyPath) else { continue }
                switch k {
                case .includesSubdomains where v.atsBoolValue == true:
                    // Reference §1.3, src S7: CopyParentDomainNameFromHostName strips only the first label.
                    add(
                        .pinSubdomainDepth, keyPath,
                        "pins for \(host) with NSIncludesSubdomains reach direct subdomains only (a.\(host), not "
                            + "b.a.\(host)): Apple's trust code strips one label when looking for a parent",
                        fix: "add separate NSPinnedDomains entries for deeper subdomains that must be pinned")
                case .pinnedCAIdentities, .pinnedLeafIdentities:
                    if lintIdentities(v.arrayValue ?? [], keyPath) { pinArrays += 1 }
                default:
                    break
                }
            }
            if pinArrays == 0 {
                add(
                    .pinWithoutIdentities, path,
                    "the pinned domain \(host) has no usable NSPinnedCAIdentities or NSPinnedLeafIdentities; each "
                        + "pinned domain must carry at least one non-empty array of identities",
                    fix: "add NSPinnedLeafIdentities (or NSPinnedCAIdentities) with a <dict> holding "
                        + "SPKI-SHA256-BASE64, or remove the \(host) entry")
            }
        }
    }

    /// Checks each identity; returns true when the array holds at least one well-formed pin.
    mutating func lintIdentities(_ identities: [PlistValue], _ path: [String]) -> Bool {
        var good = 0
        for (i, identity) in identities.enumerated() {
            let itemPath = path + ["[\(i)]"]
            guard case .dictionary(let d) = identity else {
                add(
                    .wrongType, itemPath,
                    "identity \(i) is \(article(identity.typeName)) \(identity.typeName), not a Dictionary; ATS "
                        + "ignores it",
                    fix: "write each identity as <dict><key>SPKI-SHA256-BASE64</key><string>…</string></dict>")
                continue
            }
            for key in d.keys where key != ATSKey.spkiSHA256Base64.rawValue {
                if let k = ATSKey(rawValue: key) {
                    misplaced(k, at: .pinnedIdentity, itemPath + [key])
                } else {
                    unknownKey(key, at: .pinnedIdentity, itemPath + [key])
                }
            }
            let hashPath = itemPath + [ATSKey.spkiSHA256Base64.rawValue]
            guard let value = d[ATSKey.spkiSHA256Base64.rawValue] else {
                add(
                    .malformedPin, itemPath, "identity \(i) has no SPKI-SHA256-BASE64 key, so it pins nothing",
                    fix: "add <key>SPKI-SHA256-BASE64</key> with the base64 SHA-256 of the certificate's "
                        + "SubjectPublicKeyInfo")
                continue
            }
            guard checkType(.spkiSHA256Base64, value, hashPath), let hash = value.stringValue else { continue }
            if let problem = Self.spkiProblem(hash) {
                add(
                    .malformedPin, hashPath,
                    "\"\(hash)\" is not a SPKI SHA-256 pin: \(problem); no certificate can match it",
                    fix: "compute it with: openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform "
                        + "der | openssl dgst -sha256 -binary | openssl enc -base64")
            } else {
                good += 1
            }
        }
        return good > 0
    }

    /// Nil when `s` is standard base64 of exactly 32 bytes (44 characters ending in one `=`), else the reason.
    static func spkiProblem(_ s: String) -> String? {
        let alphabet = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
        let body = s.hasSuffix("=") ? s.dropLast(s.hasSuffix("==") ? 2 : 1) : Substring(s)
        let bad = body.filter { !alphabet.contains($0) }
        // URL-safe base64 only when '-' and '_' are the only strangers; "not-base64!!" is not base64 at all.
        if let other = bad.first(where: { $0 != "-" && $0 != "_" }) {
            return "'\(other)' is not a base64 character"
        }
        if !bad.isEmpty {
            return "it uses the URL-safe alphabet ('-', '_'); Apple expects standard base64 ('+', '/')"
        }
        guard s.count % 4 == 0 else { return "its length \(s.count) is not a multiple of 4" }
        let padding = s.count - body.count
        let bytes = s.count / 4 * 3 - padding
        guard bytes == 32 else { return "it decodes to \(bytes) bytes, not the 32 of a SHA-256 digest" }
        return nil
    }
}
