internal import COpenSSL
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

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
    /// Only one of the CA's two files is in the directory.
    case incomplete(present: String, missing: String)
    case openSSL(OpenSSLError)

    public var description: String {
        switch self {
        case .notFound(let d): "no CA found in \(d) (create one with `atsproxy ca init`)"
        case .alreadyExists(let p): "a CA already exists at \(p) (use --force to replace it)"
        case .io(let p, let m): "\(p): \(m)"
        case .invalid(let p, let r): "\(p): \(r)"
        case .incomplete(let present, let missing):
            "\(present) is there but \(missing) is not: restore the missing file, or remove \(present) to create a "
                + "new CA (devices must then trust the new one)"
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

    /// `.incomplete` when `directory` holds one of the CA's two files but not the other; nil otherwise.
    public static func halfError(in directory: URL) -> CertificateAuthorityError? {
        let paths = [certificateFileName, keyFileName].map { directory.appendingPathComponent($0).path }
        let present = paths.filter { FileManager.default.fileExists(atPath: $0) }
        guard present.count == 1, let missing = paths.first(where: { $0 != present[0] }) else { return nil }
        return .incomplete(present: present[0], missing: missing)
    }

    /// Loads the CA from `directory`; checks that the key belongs to the certificate and that it is a CA.
    public static func load(from directory: URL) throws(CertificateAuthorityError) -> CertificateAuthority {
        guard exists(in: directory) else { throw halfError(in: directory) ?? .notFound(directory: directory.path) }
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
            // 0700, whatever the umask: the folder holds the key, and under `umask 000` it was created 0777.
            try fm.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            var isFolder: ObjCBool = false
            let isFile = fm.fileExists(atPath: directory.path, isDirectory: &isFolder) && !isFolder.boolValue
            let reason = isFile ? "a file has that name" : fileReason(error, path: directory.path)
            throw .io(path: directory.path, message: "cannot create the CA folder (\(reason))")
        }
        try Self.replaceFile(at: keyPath, with: Array(key.pem.utf8), mode: 0o600, what: "the private key")
        try Self.replaceFile(at: certPath, with: Array(certificate.pem.utf8), mode: 0o644, what: "the certificate")
    }

    /// Writes `bytes` to a new file next to `path` and renames it over `path`. The file is created with `mode` (which
    /// the umask can only narrow) and set to exactly `mode` before anything is written: a key written first and
    /// restricted afterwards (as `FileManager.createFile` does with attributes) is readable by others until then.
    private static func replaceFile(
        at path: String, with bytes: [UInt8], mode: mode_t, what: String
    ) throws(CertificateAuthorityError) {
        let directory = (path as NSString).deletingLastPathComponent
        let name = (path as NSString).lastPathComponent
        let temporary = (directory as NSString).appendingPathComponent(
            ".\(name).\(String(UInt64.random(in: 0...UInt64.max), radix: 16)).tmp")
        func failed(_ step: String) -> CertificateAuthorityError {
            .io(path: path, message: "cannot write \(what) (\(step): \(String(cString: strerror(errno))))")
        }
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else { throw failed("create") }
        var written = 0
        var error: CertificateAuthorityError?
        if fchmod(fd, mode) != 0 { error = failed("chmod") }
        while error == nil, written < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + written, $0.count - written) }
            if n > 0 {
                written += n
            } else if n == 0 || errno != EINTR {
                error = failed("write")
            }
        }
        if error == nil, fsync(fd) != 0 { error = failed("fsync") }
        if close(fd) != 0, error == nil { error = failed("close") }
        if error == nil, rename(temporary, path) != 0 { error = failed("rename") }
        if let error {
            unlink(temporary)
            throw error
        }
    }

    /// A warning when the key file in `directory` is open to group or others, naming the file and the fix; nil
    /// when it is private to its owner.
    public static func keyPermissionWarning(in directory: URL) throws(CertificateAuthorityError) -> String? {
        let keyPath = directory.appendingPathComponent(keyFileName).path
        let mode: Int
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: keyPath)
            guard let value = (attributes[.posixPermissions] as? NSNumber)?.intValue else {
                throw CertificateAuthorityError.io(path: keyPath, message: "cannot read the file's permissions")
            }
            mode = value
        } catch let error as CertificateAuthorityError {
            throw error
        } catch {
            throw .io(path: keyPath, message: error.localizedDescription)
        }
        guard mode & 0o077 != 0 else { return nil }
        let access = mode & 0o044 != 0 ? "readable" : "accessible"
        let octal = "0" + String(mode & 0o777, radix: 8)
        return "\(keyPath) is \(access) by group or others (mode \(octal)). It is the key to every TLS connection "
            + "of every device that trusts this CA; fix: chmod 600 \(shellQuoted(keyPath))"
    }

    /// Where mirror mode keeps its second CA, inside the CA directory: it signs the leaves that reproduce an
    /// untrusted upstream chain, so it must never be installed anywhere (`ca export` only reads the directory's own
    /// files, never this folder's).
    public static let neverTrustedFolderName = "never-trusted"

    /// Loads the CA in `directory`, or creates and writes one (named `commonName`, or after the machine and the
    /// day). `created` tells which happened.
    public static func loadOrCreate(in directory: URL, commonName: String? = nil) throws(CertificateAuthorityError)
        -> (authority: CertificateAuthority, created: Bool)
    {
        if exists(in: directory) { return (try load(from: directory), false) }
        // One file without the other: a new CA would replace a certificate devices may trust, or a key.
        if let half = halfError(in: directory) { throw half }
        let ca: CertificateAuthority
        do { ca = try create(commonName: commonName) } catch { throw .openSSL(error) }
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
            throw .io(path: path, message: "cannot read the file (\(fileReason(error, path: path)))")
        }
    }

    /// `text` as one shell word: as is when it is plain, else in single quotes.
    static func shellQuoted(_ text: String) -> String {
        let plain = text.unicodeScalars.allSatisfy {
            $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "/._-+,:@".unicodeScalars.contains($0))
        }
        return plain && !text.isEmpty ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
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
