import ATSLint
import ATSPolicy
import ArgumentParser
import Foundation
import PolicyLoader

/// `atsproxy lint P`: checks an ATS policy (plist, Info.plist, .app or .ipa) for settings ATS ignores, misreads or
/// that weaken security.
///
/// Exit status: 0 when no finding reaches `--fail-on`, 1 when one does, 2 when the policy cannot be loaded
/// (the reason goes to stderr), 64 for a usage error.
struct LintCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lint",
        abstract: "Check an App Transport Security policy for mistakes and weak settings.",
        discussion: """
            P is a plist (a whole Info.plist or a bare NSAppTransportSecurity dictionary, XML or binary), an .app \
            folder or an .ipa. Exit status: 0 clean, 1 a finding at or above --fail-on, 2 the policy could not be \
            loaded.
            """)

    /// Report formats.
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, json, sarif
    }

    @Argument(help: "The policy: a .plist, an .app folder or an .ipa.")
    var path: String

    @Option(
        name: .customLong("ios"),
        help: "iOS version whose ATS behaviour applies (9 or later; mapped to the bands 9, 10, 14, 17, 26).")
    var iosVersion: Int = IOSProfile.newest.rawValue

    @Option(help: "Output format: text, json or sarif.")
    var format: Format = .text

    @Option(name: .customLong("fail-on"), help: "Lowest severity that makes the exit status 1: error, warning or note.")
    var failOn: LintSeverity = .error

    func validate() throws {
        guard IOSProfile.band(for: iosVersion) != nil else {
            throw ValidationError("--ios must be 9 or later (got \(iosVersion))")
        }
    }

    func run() throws {
        guard let profile = IOSProfile.band(for: iosVersion) else { throw ExitCode.validationFailure }
        let loaded: LoadedPolicy
        do {
            loaded = try PolicyLoader.load(path: path)
        } catch {
            FileHandle.standardError.write(Data("atsproxy lint: error: \(error.description)\n".utf8))
            throw ExitCode(2)
        }
        var notes = loaded.notes
        if let band = profile.bandNote(forVersion: iosVersion, verb: "checked") { notes.append(band) }
        let findings = loaded.lintFindings(profile: profile)
        let report = LintReport(
            artifactPath: path, sourceDescription: loaded.sourceDescription, profile: profile, findings: findings,
            notes: notes, keyPositions: format == .sarif ? Self.keyPositions(path) : [:])
        let output: String
        switch format {
        case .text: output = report.text()
        case .json: output = report.json()
        case .sarif: output = report.sarif(toolVersion: ATSProxyCommand.configuration.version)
        }
        FileHandle.standardOutput.write(Data(output.utf8))
        if report.fails(at: failOn) { throw ExitCode(1) }
    }
}

extension LintCommand {
    /// Where the keys are in `path` when it is an XML plist (a bundle's or binary plist's keys have no line to
    /// point at). A file that cannot be read again gives none: the report still names the file.
    static func keyPositions(_ path: String) -> [[String]: LintReport.SourceRegion] {
        guard let data = FileManager.default.contents(atPath: path), data.starts(with: Array("<?xml".utf8))
            || data.prefix(512).range(of: Data("<plist".utf8)) != nil
        else { return [:] }
        return PlistKeyLocator.keyPositions(in: Array(data)).mapValues {
            LintReport.SourceRegion(line: $0.line, column: $0.column)
        }
    }
}

extension LintSeverity: ExpressibleByArgument {}

extension LoadedPolicy {
    /// Every lint finding for this policy on `profile`: ATS keys outside NSAppTransportSecurity, then the
    /// dictionary itself. `lint` reports them; `run` prints them as its startup warnings.
    func lintFindings(profile: IOSProfile) -> [LintFinding] {
        lintInfoPlistRoot(misplacedATSKeys: misplacedATSKeys) + lint(atsDictionary, profile: profile)
    }
}
