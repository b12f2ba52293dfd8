import Foundation
import TestSupport
import Testing

/// Runs the built `atsproxy` binary with `arguments`, in `directory` when given; kills it by pid after `limit`
/// seconds, so a hung command fails its test instead of hanging the suite.
func runATSProxy(_ arguments: [String], in directory: URL? = nil, limit: Double = 120) throws
    -> (status: Int32, stdout: Data, stderr: String)
{
    let run = try runCommand(LintCLITests.binary, arguments, in: directory, limit: limit)
    return (run.status, run.stdout, run.stderrText)
}

/// A fresh folder under the temp directory, removed on deinit.
final class ScratchDirectory: Sendable {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("atsproxy-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(at: url) }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
}

@Suite("atsproxy ca")
struct CACLITests {
    @Test("ca init creates certs/ in the current directory with a 0600 key, refuses a second init without --force")
    func initDefaultsToCertsAndRefusesOverwrite() throws {
        let dir = try ScratchDirectory()
        let first = try runATSProxy(["ca", "init"], in: dir.url)
        #expect(first.status == 0)
        #expect(String(decoding: first.stdout, as: UTF8.self).contains("Created ATSProxy CA ("))
        let key = dir.path("certs/atsproxy-ca-key.pem")
        let mode = try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        let before = try String(contentsOfFile: dir.path("certs/atsproxy-ca.pem"), encoding: .utf8)

        let second = try runATSProxy(["ca", "init"], in: dir.url)
        #expect(second.status == 1)
        #expect(second.stderr.contains("already exists"))
        #expect(try String(contentsOfFile: dir.path("certs/atsproxy-ca.pem"), encoding: .utf8) == before)

        let forced = try runATSProxy(["ca", "init", "--force"], in: dir.url)
        #expect(forced.status == 0)
        #expect(try String(contentsOfFile: dir.path("certs/atsproxy-ca.pem"), encoding: .utf8) != before)
    }

    @Test("ca init makes the folder 0700, the key 0600 and the certificate 0644 whatever the umask, and no other file",
          arguments: ["000", "077"])
    func modesDoNotDependOnTheUmask(umask: String) throws {
        let dir = try ScratchDirectory()
        let shell = try runCommand(
            "/bin/sh", ["-c", "umask \(umask) && exec \"$0\" ca init --ca-dir ca", LintCLITests.binary], in: dir.url)
        #expect(shell.status == 0, "\(shell.stderrText)")
        func mode(_ name: String) throws -> Int? {
            (try FileManager.default.attributesOfItem(atPath: dir.path("ca/\(name)"))[.posixPermissions] as? NSNumber)?
                .intValue
        }
        #expect(try mode("atsproxy-ca-key.pem") == 0o600)
        #expect(try mode("atsproxy-ca.pem") == 0o644)
        let folder = try FileManager.default.attributesOfItem(atPath: dir.path("ca"))[.posixPermissions] as? NSNumber
        #expect(folder?.intValue == 0o700)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path("ca")).sorted()
            == ["atsproxy-ca-key.pem", "atsproxy-ca.pem"])
    }

    @Test("ca export writes PEM, DER and a mobileconfig holding the same certificate")
    func exportFormats() throws {
        let dir = try ScratchDirectory()
        #expect(try runATSProxy(["ca", "init", "--ca-dir", dir.path("ca")]).status == 0)
        let pem = try runATSProxy(["ca", "export", "--ca-dir", dir.path("ca")])
        #expect(pem.status == 0)
        let pemText = String(decoding: pem.stdout, as: UTF8.self)
        #expect(pemText.hasPrefix("-----BEGIN CERTIFICATE-----"))

        let der = try runATSProxy(["ca", "export", "--ca-dir", dir.path("ca"), "--format", "der", "--out", dir.path("ca.cer")])
        #expect(der.status == 0)
        let derBytes = try Data(contentsOf: URL(fileURLWithPath: dir.path("ca.cer")))
        #expect(derBytes.first == 0x30)
        let body = pemText.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        #expect(Data(base64Encoded: body) == derBytes)

        let mc = try runATSProxy(["ca", "export", "--ca-dir", dir.path("ca"), "--format", "mobileconfig"])
        #expect(mc.status == 0)
        let plist = try #require(try PropertyListSerialization.propertyList(from: mc.stdout, format: nil) as? [String: Any])
        let payload = try #require((plist["PayloadContent"] as? [[String: Any]])?.first)
        #expect(payload["PayloadType"] as? String == "com.apple.security.root")
        #expect(payload["PayloadContent"] as? Data == derBytes)
    }

    @Test("ca export to a path it cannot write names the path and the system's reason, not Foundation's")
    func exportUnwritablePath() throws {
        let dir = try ScratchDirectory()
        #expect(try runATSProxy(["ca", "init", "--ca-dir", dir.path("ca")]).status == 0)
        let cases = [
            (dir.path("no-such-folder/ca.pem"), "No such file or directory"),
            ("/proc/x.pem", "No such file or directory"),
            (dir.path("ca"), "Is a directory"),
        ]
        for (out, reason) in cases {
            let r = try runATSProxy(["ca", "export", "--ca-dir", dir.path("ca"), "--out", out])
            #expect(r.status == 1)
            #expect(r.stderr == "atsproxy ca export: cannot write \(out): \(reason)\n")
            #expect(!r.stderr.contains("could not be completed"))
        }
    }

    @Test("ca info shows subject, fingerprint and the NSPinnedDomains pin; a missing CA is a clear error")
    func info() throws {
        let dir = try ScratchDirectory()
        let missing = try runATSProxy(["ca", "info", "--ca-dir", dir.path("none")])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("no CA found"))
        #expect(try runATSProxy(["ca", "init", "--ca-dir", dir.path("ca")]).status == 0)
        let r = try runATSProxy(["ca", "info", "--ca-dir", dir.path("ca")])
        let text = String(decoding: r.stdout, as: UTF8.self)
        #expect(r.status == 0)
        #expect(text.contains("Subject:             CN=ATSProxy CA ("))
        #expect(text.contains("SHA-256 fingerprint: "))
        let pin = try #require(text.split(separator: "\n").first { $0.hasPrefix("SPKI SHA-256 (pin):") })
        #expect(Data(base64Encoded: String(pin.split(separator: " ").last ?? ""))?.count == 32)
    }

    @Test("A CA folder holding one of its two files: info, export and init all name the missing file")
    func halfCAIsNamedByEveryCommand() throws {
        let dir = try ScratchDirectory()
        #expect(try runATSProxy(["ca", "init", "--ca-dir", dir.path("ca")]).status == 0)
        try FileManager.default.removeItem(atPath: dir.path("ca/atsproxy-ca-key.pem"))
        let expected = "is there but \(dir.path("ca/atsproxy-ca-key.pem")) is not: restore the missing file"
        for command in [["info"], ["export"], ["init"]] {
            let r = try runATSProxy(["ca"] + command + ["--ca-dir", dir.path("ca")])
            #expect(r.status == 1, "\(command)")
            #expect(r.stderr.contains(expected), "\(command): \(r.stderr)")
            #expect(!r.stderr.contains("no CA found") && !r.stderr.contains("already exists"), "\(r.stderr)")
        }
        #expect(try runATSProxy(["ca", "init", "--force", "--ca-dir", dir.path("ca")]).status == 0)
    }
}
