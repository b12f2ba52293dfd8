import ATSPolicy
import Foundation
import TLSCore

extension DiagnoseReport {
    static let separator = String(repeating: "=", count: 80)

    /// nscurl's `--ats-diagnostics` layout (reference §5.1), then a "Why" section and the recommended exception.
    public func renderText(verbose: Bool) -> String {
        var out: [String] = [
            "Starting ATS Diagnostics", "",
            "Configuring ATS Info.plist keys and displaying the result of HTTPS loads to \(url).",
            "A test will \"PASS\" if URLSession:task:didCompleteWithError: returns a nil error.",
        ]
        if !verbose {
            out.append(
                "Use '--verbose' to view the ATS dictionaries used and to display the error received in "
                    + "URLSession:task:didCompleteWithError:.")
        }
        out.append(DiagnoseReport.separator)
        for section in sections {
            guard let title = section.first?.testCase.section else { continue }
            out += ["", title, "---"]
            for result in section {
                out.append(result.testCase.name)
                if verbose {
                    out.append("ATS Dictionary:")
                    out.append(NSDictionaryDescription.render(result.testCase.dictionary))
                }
                out.append("Result : \(result.passed ? "PASS" : "FAIL")")
                if verbose, let error = result.error { out.append("Error : \(error)") }
                out.append("---")
            }
            out += ["", DiagnoseReport.separator]
        }
        out += ["", "Why (simulated iOS \(profile.rawValue))", "---"]
        out += whyLines()
        out += ["---", "", "Recommended exception", "---"]
        out += recommendationLines()
        out.append("---")
        if let app = appPolicy {
            out += ["", "The app's own policy", "---"]
            out.append("Source: \(app.source)")
            out.append("Decided by: \(app.decidedBy)")
            out.append("Result : \(app.allowed ? "PASS" : "FAIL")")
            for v in app.violations { out.append("  - \(v.explanation)") }
            if let error = app.error, verbose { out.append("Error : \(error)") }
            out.append("---")
        }
        if !notes.isEmpty {
            out.append("")
            out += notes.map { "Note: \($0)" }
        }
        return out.joined(separator: "\n") + "\n"
    }

    private func whyLines() -> [String] {
        var lines: [String] = []
        if let caps = capabilities {
            let versions = caps.supportedVersions.isEmpty
                ? "none of TLSv1.0–TLSv1.3" : caps.supportedVersions.map(\.plistName).joined(separator: ", ")
            var line = "Server supports: \(versions)"
            if let name = caps.preferredCipherName, let code = caps.preferredCipherCode {
                line += "; prefers \(name) (\(hex(code)))"
            }
            line += "; forward secrecy: \(caps.supportsForwardSecrecy ? "yes" : "no")"
            lines.append(line)
        }
        if let offer = defaultOffer { lines.append("iOS \(profile.rawValue) default connection: \(offer)") }
        guard let d = defaultResult else { return lines }
        let f = d.facts
        if let failure = f.failure {
            lines.append("Default connection: the handshake failed: \(failure)")
        } else if let version = f.version {
            var line = "Default connection: negotiated \(version.plistName)"
            if let name = f.cipherSuiteName, let code = f.cipherSuiteCode { line += ", \(name) (\(hex(code)))" }
            if let group = f.keyExchangeGroup { line += ", key exchange \(group)" }
            if let alpn = f.alpn { line += ", ALPN \(alpn)" }
            lines.append(line)
        }
        if let leaf = f.chain.first {
            var key = "\(leaf.keyType.rawValue.uppercased())-\(leaf.keyBits)"
            if let curve = leaf.curve { key = "EC \(curve)" }
            let names = (leaf.dnsNames + leaf.ipAddresses)
            let iso = ISO8601DateFormatter()
            lines.append(
                "Leaf certificate: \(leaf.subject); \(key); signed with \(leaf.signatureHash.rawValue.uppercased()); "
                    + "SAN: \(names.isEmpty ? "none" : names.joined(separator: ", ")); "
                    + "valid \(iso.string(from: leaf.notBefore)) to \(iso.string(from: leaf.notAfter))")
            for (i, cert) in f.chain.enumerated().dropFirst() where !cert.signatureHash.isSHA2OrBetter {
                lines.append("Chain certificate \(i) (\(cert.subject)) is signed with \(cert.signatureHash.rawValue.uppercased())")
            }
            lines.append("Trust: \(f.trust); host name \(f.hostnameMatches ? "matches" : "does NOT match") the SAN")
        }
        if atsApplies == false, let why = atsDecision {
            lines.append("ATS's checks do not apply to this host: \(why)")
        }
        if d.passed {
            lines.append(
                atsApplies == false
                    ? "Default server trust accepts the default connection." : "ATS allows the default connection.")
        } else {
            let layers = d.violations.map { Layer($0.kind, profile: profile) }
            let distinct = layers.reduce(into: [Layer]()) { if !$0.contains($1) { $0.append($1) } }
            lines.append(refusalHeading(distinct))
            for (v, layer) in zip(d.violations, layers) {
                var codes = "\(v.urlError.code)"
                if let ssl = v.sslError { codes += " / \(ssl.code) \(ssl.name)" }
                let tag = distinct.count > 1 ? "(\(layer.name)) " : ""
                lines.append("  - \(tag)\(v.explanation) [\(codes)]")
            }
        }
        return lines
    }

    /// Which layer of the app's stack refuses a connection for a violation (reference §3.3, §3.6: default trust
    /// judges every HTTPS load, ATS only adds its minimums on top).
    private enum Layer: Equatable {
        case ats, defaultTrust, tlsStack, handshake, network

        init(_ kind: ViolationKind, profile: IOSProfile) {
            switch kind {
            case .cleartextNotAllowed, .tlsVersionTooLow, .cipherSuiteNotAllowed, .pinMismatch,
                .certificateTransparencyMissing:
                self = .ats
            case .weakKey, .weakSignatureHash:
                // Part of default trust since iOS 13 (§3.4); before that only ATS checked them.
                self = profile.hasIOS13TrustRules ? .defaultTrust : .ats
            case .untrustedRoot, .selfSigned, .hostnameMismatch, .expired, .notYetValid, .invalidChain,
                .missingServerAuthEKU, .validityTooLong:
                self = .defaultTrust
            case .tlsVersionRefusedByOS:
                self = .tlsStack
            case .noSharedCipherOrVersion, .notTLS, .connectionFailed, .timedOut:
                self = .handshake
            case .unreachable:
                self = .network
            }
        }

        var name: String {
            switch self {
            case .ats: "ATS"
            case .defaultTrust: "default server trust"
            case .tlsStack: "the iOS TLS stack"
            case .handshake: "the TLS handshake"
            case .network: "the network"
            }
        }
    }

    /// "ATS refuses …", "Default server trust refuses …", "ATS and default server trust refuse …".
    private func refusalHeading(_ layers: [Layer]) -> String {
        let judges = layers.filter { $0 != .handshake }
        guard !judges.isEmpty else {
            return "The TLS handshake fails before ATS or server trust can judge the default connection:"
        }
        let names = judges.map(\.name).joined(separator: " and ")
        let verb = judges.count == 1 ? "refuses" : "refuse"
        return names.prefix(1).uppercased() + names.dropFirst() + " \(verb) the default connection:"
    }

    private func recommendationLines() -> [String] {
        switch recommendation {
        case .noExceptionNeeded:
            return ["None: the default ATS connection to \(host) passes."]
        case .exception(let name, let fix, let snippet, let pasteInside):
            return [
                "Narrowest passing test: \(name)",
                fix.summary,
                "Paste inside \(pasteInside) in Info.plist:",
                snippet,
            ]
        case .onlyArbitraryLoads:
            return [
                "Only \"Allow All Loads\" (NSAllowsArbitraryLoads = YES) passes. That disables ATS for every host; "
                    + "fix the server instead."
            ]
        case .noExceptionCanHelp(let reason):
            return ["No Info.plist exception can make this connection pass: \(reason)", "Fix the server."]
        }
    }

    private func hex(_ code: UInt16) -> String {
        let h = String(code, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - h.count)) + h
    }
}
