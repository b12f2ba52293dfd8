import ATSPolicy
import ArgumentParser
import Foundation
import PolicyLoader

/// `atsproxy explain`: how an app's ATS policy treats each URL, before any connection is made.
struct ExplainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explain",
        abstract:
            "Show how an app's ATS policy treats each URL: refused (-1022) or the rules its connection must meet.",
        discussion: """
            For each URL: the verdict, the Info.plist entry that decides it and why, the TLS versions and cipher \
            suites the simulated iOS would offer, the certificate rules, and notes where ATS behaviour is \
            unconfirmed and a reading was chosen. Without --plist, Apple's defaults apply (an app that relaxes \
            nothing), as in `atsproxy run`.

            Exit status: 0 when every URL may connect, 1 when at least one is refused before connecting, \
            2 when the policy or a URL cannot be read.
            """)

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The policy: an Info.plist, a bare NSAppTransportSecurity plist, an .app folder or an .ipa. Without it, "
                + "Apple's defaults apply."))
    var plist: String?

    @Option(name: .long, help: "iOS version to simulate (9 or later; mapped to the bands 9, 10, 14, 17, 26).")
    var ios: Int = IOSProfile.newest.rawValue

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    @OptionGroup var readings: PolicyReadingOptions

    @Argument(help: "URLs to explain, e.g. http://media-server.example.com/feed https://api.example.com.")
    var urls: [String]

    func validate() throws {
        guard IOSProfile.band(for: ios) != nil else { throw ValidationError("--ios must be 9 or later (got \(ios))") }
        guard !urls.isEmpty else { throw ValidationError("give at least one URL to explain") }
    }

    func run() throws {
        var atsDictionary: PlistValue? = AppleDefaultPolicy.atsDictionary
        var source = AppleDefaultPolicy.source
        var notes: [String] = []
        if let plist {
            let loaded: LoadedPolicy
            do {
                loaded = try PolicyLoader.load(path: plist)
            } catch {
                FileHandle.standardError.write(Data("atsproxy explain: \(error)\n".utf8))
                throw ExitCode(2)
            }
            atsDictionary = loaded.atsDictionary
            source = loaded.sourceDescription
            notes = loaded.notes
            if !loaded.misplacedATSKeys.isEmpty {
                notes.append(
                    "ATS keys outside NSAppTransportSecurity are never read: "
                        + loaded.misplacedATSKeys.joined(separator: ", "))
            }
        }
        guard let profile = IOSProfile.band(for: ios) else { throw ExitCode.validationFailure }
        let policy = ATSPolicy(atsDictionary: atsDictionary, options: readings.policyOptions(profile: profile))
        if let band = profile.bandNote(forVersion: ios, verb: "simulated") { notes.append(band) }
        let report = ExplainReport(policy: policy, urls: urls, source: source, sourceNotes: notes)
        if json {
            print(try report.renderJSON())
        } else {
            print(report.renderText(), terminator: "")
        }
        if report.anyInvalid { throw ExitCode(2) }
        if report.anyBlocked { throw ExitCode(1) }
    }
}

extension LegacyKeyReading: ExpressibleByArgument {}
extension UserRootEKUReading: ExpressibleByArgument {}
