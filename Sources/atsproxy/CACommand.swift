import ArgumentParser
import Foundation
import TLSCore

/// `atsproxy ca`: create, export and show the proxy's root CA.
struct CACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ca",
        abstract: "Create, export and show the proxy's root certificate authority.",
        discussion: """
            The CA lives as two PEM files in --ca-dir (default: certs/ in the current directory): \
            \(CertificateAuthority.certificateFileName) and \(CertificateAuthority.keyFileName) (mode 0600). \
            Install it on a device with `atsproxy ca export --format mobileconfig --out atsproxy.mobileconfig`, \
            then enable full trust in Settings › General › About › Certificate Trust Settings.
            """,
        subcommands: [Init.self, Export.self, Info.self])

    /// Options shared by every `ca` subcommand.
    struct Location: ParsableArguments {
        @Option(name: .customLong("ca-dir"), help: "Directory holding the CA files.")
        var caDir: String = "certs"

        var url: URL { URL(fileURLWithPath: caDir) }

        func load() throws -> CertificateAuthority {
            do {
                return try CertificateAuthority.load(from: url)
            } catch {
                throw failure("atsproxy ca: \(error)")
            }
        }
    }

    /// `atsproxy ca init`.
    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a new root CA (P-256, 10 years). Refuses to replace an existing one without --force.")

        @OptionGroup var location: Location

        @Flag(name: .long, help: "Replace an existing CA (devices that trusted the old one must trust the new one).")
        var force = false

        func run() throws {
            if !force, let half = CertificateAuthority.halfError(in: location.url) {
                throw failure("atsproxy ca init: \(half); or use --force to create a new CA")
            }
            if CertificateAuthority.exists(in: location.url) && !force {
                throw failure(
                    "atsproxy ca init: a CA already exists in \(location.caDir) (use --force to replace it; devices "
                        + "trusting it would then need the new one)")
            }
            let ca: CertificateAuthority
            do {
                ca = try CertificateAuthority.create()
                try ca.write(to: location.url, overwrite: force)
            } catch {
                throw failure("atsproxy ca init: \(error)")
            }
            print("Created \(ca.certificate.commonName ?? ca.info.subject)")
            print("  certificate: \(location.url.appendingPathComponent(CertificateAuthority.certificateFileName).path)")
            print("  private key: \(location.url.appendingPathComponent(CertificateAuthority.keyFileName).path)")
            print("  SHA-256 fingerprint: \(ca.info.sha256Fingerprint)")
        }
    }

    /// `atsproxy ca export`.
    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the root certificate as PEM, DER or an iOS configuration profile.")

        enum Format: String, ExpressibleByArgument, CaseIterable {
            case pem, der, mobileconfig
        }

        @OptionGroup var location: Location

        @Option(name: .long, help: "pem, der or mobileconfig.")
        var format: Format = .pem

        @Option(name: .long, help: "Write to this file instead of standard output.")
        var out: String?

        func run() throws {
            let ca = try location.load()
            let bytes: [UInt8] =
                switch format {
                case .pem: Array(ca.pem.utf8)
                case .der: ca.der
                case .mobileconfig: Array(ca.mobileConfig().utf8)
                }
            if let out {
                let url = URL(fileURLWithPath: out)
                do {
                    try Data(bytes).write(to: url)
                } catch {
                    // The system's reason ("No such file or directory"), not Foundation's "could not be completed".
                    throw failure("atsproxy ca export: cannot write \(out): \(fileReason(error, path: url.path))")
                }
                FileHandle.standardError.write(Data("Wrote \(format.rawValue) to \(out)\n".utf8))
            } else {
                FileHandle.standardOutput.write(Data(bytes))
            }
        }
    }

    /// `atsproxy ca info`.
    struct Info: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the CA's subject, validity, fingerprint and NSPinnedDomains pin.")

        @OptionGroup var location: Location

        func run() throws {
            let info = try location.load().info
            let iso = ISO8601DateFormatter()
            print("Subject:             \(info.subject)")
            print("Issuer:              \(info.issuer)")
            print("Valid from:          \(iso.string(from: info.notBefore))")
            print("Valid until:         \(iso.string(from: info.notAfter))")
            print("SHA-256 fingerprint: \(info.sha256Fingerprint)")
            print("SPKI SHA-256 (pin):  \(info.spkiSHA256Base64)")
            print("Directory:           \(location.url.path)")
        }
    }
}
