internal import COpenSSL
import Foundation

/// Errors of the CA store on disk.
public enum CertificateAuthorityError: Error, Hashable, Sendable, CustomStringConvertible {
    /// No CA in the directory (`atsproxy ca init` creates one).
    case notFound(directory: String)
    /// A CA already exists and overwriting was not asked for.
    case alreadyExists(path: String)
    /// Reading or writing a file failed.
    case io(path: String, message: String)
    /// The files exist but do not hold a usable CA.
    case invalid(path: String, reason: String)
    case openSSL(OpenSSLError)

    public var description: String {
        switch self {
        case .notFound(let d): "no CA found in \(d) (create one with `atsproxy ca init`)"
        case .alreadyExists(let p): "a CA already exists at \(p) (use --force to replace it)"
        case .io(let p, let m): "\(p): \(m)"
        case .invalid(let p, let r): "\(p): \(r)"
        case .openSSL(let e): e.description
        }
    }
}

/// The proxy's root CA: a P-256 key and a self-signed certificate stored as PEM files in a directory.
///
/// The user installs this root on the device (profile + "Certificate Trust Settings"); leaves minted from it are
/// then trusted as chaining to a *user-installed* root (reference §3.3).
public struct CertificateAuthority: Sendable {
    public let certificate: Certificate
    public let key: PrivateKey

    /// File names inside the CA directory.
    public static let certificateFileName = "atsproxy-ca.pem"
    public static let keyFileName = "atsproxy-ca-key.pem"

    public init(certificate: Certificate, key: PrivateKey) {
        self.certificate = certificate
        self.key = key
    }

    /// Creates a new root: P-256, self-signed, `CA:TRUE` critical, keyCertSign|cRLSign, SKI, ~10 years, named
    /// `ATSProxy CA (<hostname> <date>)` so several installed roots can be told apart on the device.
    public static func create(
        commonName: String? = nil, now: Date = Date(), validityYears: Int = 10
    ) throws(OpenSSLError) -> CertificateAuthority {
        let key = try PrivateKey.generate(.p256)
        let name = commonName ?? "ATSProxy CA (\(localHostName()) \(dayString(now)))"
        let builder = CertificateBuilder(
            commonName: name, organization: "ATSProxy", notBefore: now.addingTimeInterval(-3600),
            notAfter: now.addingTimeInterval(Double(validityYears) * 365.25 * 86400), subjectKey: key, issuer: nil,
            digest: .sha256,
            extensions: [
                (NID_basic_constraints, "critical,CA:TRUE"),
                (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"),
                (NID_authority_key_identifier, "keyid:always"),
            ])
        return CertificateAuthority(certificate: try builder.build(), key: key)
    }

    /// True when both CA files exist in `directory`.
    public static func exists(in directory: URL) -> Bool {
        let fm = FileManager.default
        return fm.fileExists(atPath: directory.appendingPathComponent(certificateFileName).path)
            && fm.fileExists(atPath: directory.appendingPathComponent(keyFileName).path)
    }

    /// Loads the CA from `directory`; checks that the key belongs to the certificate and that it is a CA.
    public static func load(from directory: URL) throws(CertificateAuthorityError) -> CertificateAuthority {
        guard exists(in: directory) else { throw .notFound(directory: directory.path) }
        let certPath = directory.appendingPathComponent(certificateFileName).path
        let keyPath = directory.appendingPathComponent(keyFileName).path
        let certText = try readText(certPath)
        let keyText = try readText(keyPath)
        let cert: Certificate
        let key: PrivateKey
        do {
            cert = try Certificate(pem: certText)
        } catch {
            throw .invalid(path: certPath, reason: "not a PEM certificate (\(error))")
        }
        do {
            key = try PrivateKey(pem: keyText)
        } catch {
            throw .invalid(path: keyPath, reason: "not a PEM private key (\(error))")
        }
        guard X509_check_private_key(cert.x509, key.pkey) == 1 else {
            ERR_clear_error()
            throw .invalid(path: keyPath, reason: "the key does not belong to \(certificateFileName)")
        }
        guard X509_check_ca(cert.x509) > 0 else {
            throw .invalid(path: certPath, reason: "the certificate is not a CA (no CA:TRUE basic constraint)")
        }
        return CertificateAuthority(certificate: cert, key: key)
    }

    /// Writes the certificate (0644) and key (0600) into `directory`, creating it. Refuses to replace an existing
    /// CA unless `overwrite`.
    public func write(to directory: URL, overwrite: Bool = false) throws(CertificateAuthorityError) {
        let fm = FileManager.default
        let certPath = directory.appendingPathComponent(CertificateAuthority.certificateFileName).path
        let keyPath = directory.appendingPathComponent(CertificateAuthority.keyFileName).path
        if !overwrite, fm.fileExists(atPath: certPath) || fm.fileExists(atPath: keyPath) {
            throw .alreadyExists(path: fm.fileExists(atPath: certPath) ? certPath : keyPath)
        }
        do {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw .io(path: directory.path, message: "cannot create directory: \(error.localizedDescription)")
        }
        // Remove first so the new key file is created with mode 0600 rather than keeping an old file's mode.
        for path in [certPath, keyPath] where fm.fileExists(atPath: path) {
            do { try fm.removeItem(atPath: path) } catch {
                throw .io(path: path, message: "cannot replace: \(error.localizedDescription)")
            }
        }
        guard fm.createFile(atPath: keyPath, contents: Data(key.pem.utf8), attributes: [.posixPermissions: 0o600])
        else { throw .io(path: keyPath, message: "cannot write the private key") }
        guard
            fm.createFile(
                atPath: certPath, contents: Data(certificate.pem.utf8), attributes: [.posixPermissions: 0o644])
        else { throw .io(path: certPath, message: "cannot write the certificate") }
    }

    /// Loads the CA in `directory`, or creates and writes one. `created` tells which happened.
    public static func loadOrCreate(in directory: URL) throws(CertificateAuthorityError) -> (
        authority: CertificateAuthority, created: Bool
    ) {
        if exists(in: directory) { return (try load(from: directory), false) }
        let ca: CertificateAuthority
        do { ca = try create() } catch { throw .openSSL(error) }
        try ca.write(to: directory)
        return (ca, true)
    }

    // MARK: Export

    /// PEM text of the root certificate.
    public var pem: String { certificate.pem }
    /// DER bytes of the root certificate (what iOS calls a `.cer`).
    public var der: [UInt8] { certificate.derBytes }

    /// An iOS configuration profile (`.mobileconfig`) with one `com.apple.security.root` payload holding the DER.
    /// UUIDs are derived from the certificate's fingerprint, so exporting twice gives the same file.
    public func mobileConfig() -> String {
        let info = CertificateInspector.info(certificate)
        let digest = Digest.sha256(der)
        let profileUUID = uuidString(digest, salt: 0)
        let payloadUUID = uuidString(digest, salt: 1)
        let short = String(info.sha256Fingerprint.replacingOccurrences(of: ":", with: "").prefix(16))
        let name = xmlEscape(certificate.commonName ?? "ATSProxy CA")
        let base64 = Data(der).base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>
            \t<key>PayloadContent</key>
            \t<array>
            \t\t<dict>
            \t\t\t<key>PayloadCertificateFileName</key>
            \t\t\t<string>atsproxy-ca.cer</string>
            \t\t\t<key>PayloadContent</key>
            \t\t\t<data>
            \(base64)
            \t\t\t</data>
            \t\t\t<key>PayloadDescription</key>
            \t\t\t<string>Adds the ATSProxy root certificate</string>
            \t\t\t<key>PayloadDisplayName</key>
            \t\t\t<string>\(name)</string>
            \t\t\t<key>PayloadIdentifier</key>
            \t\t\t<string>dev.atsproxy.ca.\(short).root</string>
            \t\t\t<key>PayloadType</key>
            \t\t\t<string>com.apple.security.root</string>
            \t\t\t<key>PayloadUUID</key>
            \t\t\t<string>\(payloadUUID)</string>
            \t\t\t<key>PayloadVersion</key>
            \t\t\t<integer>1</integer>
            \t\t</dict>
            \t</array>
            \t<key>PayloadDescription</key>
            \t<string>Installs the ATSProxy root CA. After installing, enable full trust in Settings › General › About › Certificate Trust Settings.</string>
            \t<key>PayloadDisplayName</key>
            \t<string>\(name)</string>
            \t<key>PayloadIdentifier</key>
            \t<string>dev.atsproxy.ca.\(short)</string>
            \t<key>PayloadRemovalDisallowed</key>
            \t<false/>
            \t<key>PayloadType</key>
            \t<string>Configuration</string>
            \t<key>PayloadUUID</key>
            \t<string>\(profileUUID)</string>
            \t<key>PayloadVersion</key>
            \t<integer>1</integer>
            </dict>
            </plist>

            """
    }

    /// Subject, validity, fingerprint and pin of the root.
    public var info: CertificateInfo { CertificateInspector.info(certificate) }

    // MARK: Helpers

    private static func readText(_ path: String) throws(CertificateAuthorityError) -> String {
        do { return try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw .io(path: path, message: error.localizedDescription)
        }
    }

    static func localHostName() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, 255) == 0 else { return "localhost" }
        let name = cString(buffer)
        return name.isEmpty ? "localhost" : name
    }

    static func dayString(_ date: Date) -> String {
        var t = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ v: Int32) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))"
    }

    private func uuidString(_ digest: [UInt8], salt: UInt8) -> String {
        var b = Array(Digest.sha256(digest + [salt]).prefix(16))
        b[6] = (b[6] & 0x0F) | 0x40  // version 4 layout
        b[8] = (b[8] & 0x3F) | 0x80  // RFC 4122 variant
        let h = Digest.hex(b)
        let c = Array(h)
        return [c[0..<8], c[8..<12], c[12..<16], c[16..<20], c[20..<32]].map { String($0) }.joined(separator: "-")
    }

    private func xmlEscape(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }
}
