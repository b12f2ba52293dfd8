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
            lines.append("Default connection: the handshake failed: \(describe(failure))")
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
        if d.passed {
            lines.append("ATS allows the default connection.")
        } else {
            lines.append("ATS refuses the default connection:")
            for v in d.violations {
                var codes = "\(v.urlError.code)"
                if let ssl = v.sslError { codes += " / \(ssl.code) \(ssl.name)" }
                lines.append("  - \(v.explanation) [\(codes)]")
            }
        }
        return lines
    }

    private func recommendationLines() -> [String] {
        switch recommendation {
        case .noExceptionNeeded:
            return ["None: the default ATS connection to \(host) passes."]
        case .exception(let name, let fix, let snippet):
            return [
                "Narrowest passing test: \(name)",
                fix.summary,
                "Paste inside NSAppTransportSecurity in Info.plist:",
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

    private func describe(_ failure: HandshakeFailure) -> String {
        switch failure {
        case .alertReceived(let code):
            "the server sent the alert \(TLSAlert(code))"
        case .localError(let text): text
        case .closedDuringHandshake: "the connection closed before the handshake finished"
        case .notTLS: "the server did not answer with TLS"
        case .timedOut: "the server did not complete it within the timeout"
        }
    }

    private func hex(_ code: UInt16) -> String {
        let h = String(code, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: max(0, 4 - h.count)) + h
    }
}
