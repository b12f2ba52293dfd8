import ATSLint
import ATSPolicy
import Foundation
import PolicyLoader
import ProxyCore
import TLSCore

/// The app's ATS policy as `run` applies it (`--plist`, else Apple's defaults), with the extra roots upstream
/// certificates are checked against (`--trust-ca`). A policy with findings has them written as `lint` would.
struct RunPolicy {
    let atsDictionary: PlistValue?
    /// Where the policy came from, as the banner and the web view say it.
    let source: String
    let policy: ATSPolicy
    let extraRoots: [Certificate]

    init(_ command: RunCommand, profile: IOSProfile) throws {
        var atsDictionary: PlistValue? = AppleDefaultPolicy.atsDictionary
        var source = AppleDefaultPolicy.source
        if let plist = command.plist {
            let loaded: LoadedPolicy
            do { loaded = try PolicyLoader.load(path: plist) } catch {
                throw failure("atsproxy run: error: \(error.description)", status: 2)
            }
            atsDictionary = loaded.atsDictionary
            source = loaded.sourceDescription
            // The same findings as `atsproxy lint`, one line each: one piece of code decides what is wrong.
            let findings = loaded.lintFindings(profile: profile)
            for finding in findings {
                FileHandle.standardError.write(Data("atsproxy: policy: \(finding.oneLine)\n".utf8))
            }
            if !findings.isEmpty {
                FileHandle.standardError.write(
                    Data("atsproxy: policy: fixes: atsproxy lint \(plist) --ios \(command.iosVersion)\n".utf8))
            }
        }
        self.atsDictionary = atsDictionary
        self.source = source
        policy = ATSPolicy(atsDictionary: atsDictionary, options: command.readings.policyOptions(profile: profile))
        var roots: [Certificate] = []
        for path in command.trustCA {
            let text: String
            do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
                let reason = FileManager.default.fileExists(atPath: path) ? error.localizedDescription : "no such file"
                throw failure("atsproxy run: error: --trust-ca \(path): cannot read the file (\(reason))", status: 2)
            }
            do { roots += try Certificate.chain(pem: text) } catch {
                throw failure("atsproxy run: error: --trust-ca \(path): no PEM certificate in it (\(error))", status: 2)
            }
        }
        extraRoots = roots
    }
}
