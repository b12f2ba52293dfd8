import Foundation
import ProxyCore
import TLSCore

/// The CAs `run` signs with, loaded from `--ca-dir` or created there on the first run: the one devices trust, and
/// in mirror mode the never-trusted one.
struct RunAuthorities {
    let authority: CertificateAuthority
    /// The CA was made by this run (the banner says to trust it).
    let created: Bool
    /// Mirror mode reproduces an untrusted upstream chain with a leaf from a second CA, kept beside the main one so
    /// its leaves stay the same across runs, and never offered for install.
    let neverTrusted: CertificateAuthority?

    init(_ command: RunCommand) throws {
        let caURL = URL(fileURLWithPath: command.caDir)
        // Named after the option, as --log-json's errors are: the CA's files and folder are the user's choice.
        let keyWarning: String?
        do {
            (authority, created) = try CertificateAuthority.loadOrCreate(in: caURL)
            keyWarning = try CertificateAuthority.keyPermissionWarning(in: caURL)
        } catch {
            throw failure("atsproxy run: error: --ca-dir: \(error)")
        }
        if let keyWarning {
            FileHandle.standardError.write(Data("atsproxy: warning: \(keyWarning)\n".utf8))
        }
        neverTrusted = command.ats == .mirror ? try Self.neverTrusted(in: caURL) : nil
    }

    private static func neverTrusted(in caURL: URL) throws -> CertificateAuthority {
        let folder = caURL.appendingPathComponent(CertificateAuthority.neverTrustedFolderName)
        do {
            do {
                return try CertificateAuthority.loadOrCreate(
                    in: folder, commonName: "ATSProxy never-trusted CA (mirror mode; do not install)").authority
            } catch .alreadyExists {
                // Another proxy sharing --ca-dir wrote it between our look and our write: use that one.
                return try CertificateAuthority.load(from: folder)
            }
        } catch {
            throw failure("atsproxy run: error: --ca-dir: mirror mode's never-trusted CA: \(error)")
        }
    }
}
