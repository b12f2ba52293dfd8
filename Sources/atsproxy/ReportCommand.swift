import ATSPolicy
import ATSReport
import ArgumentParser
import CaptureStore
import Foundation
import PolicyLoader

#if canImport(Glibc)
import Glibc
#endif

/// `atsproxy report FILE --plist POLICY`: the app's ATS policy against what a capture observed.
struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Judge an app's ATS policy against a capture: missing, unused and over-broad exceptions, and the "
            + "smallest policy that lets the observed traffic through.",
        discussion: """
            Reads a capture made with `atsproxy run --capture` and judges every host it saw again, from the \
            recorded handshake facts, under --plist (or Apple's defaults): the verdict and deciding entry per \
            host, the missing exceptions with the narrowest fix (as `explain` and `diagnose` give them), the \
            exceptions no observed load needed, and a suggested NSAppTransportSecurity dictionary, checked against \
            every observation. The capture may have been made with any policy, or none.

            --format plist prints the suggestion alone as a whole plist, ready for `explain --plist`.

            Exit status: 0 when every observed load passes under the policy, 1 when some would fail, \
            2 when the capture or the policy cannot be read.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, markdown, json, plist
    }

    @Argument(help: "The capture file (from `atsproxy run --capture`), or a postgresql:// team store.")
    var file: String

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The app's policy: an Info.plist, a bare NSAppTransportSecurity plist, an .app folder or an .ipa. "
                + "Without it, Apple's defaults are judged."))
    var plist: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: "iOS version to simulate (9 or later); default: the one the capture was made with.")
    var ios: Int?

    @Option(name: .long, help: "Output: text (default), markdown, json, or plist (the suggested policy alone).")
    var format: Format = .text

    @Flag(name: .long, help: "Same as --format json.")
    var json = false

    @Option(name: .customLong("run"), help: "Judge one run of the capture (a file may hold several); default: all.")
    var runID: Int64?

    @OptionGroup var readings: PolicyReadingOptions

    @OptionGroup var store: TeamStoreOptions

    func validate() throws {
        if let ios, IOSProfile.band(for: ios) == nil {
            throw ValidationError("--ios must be 9 or later (got \(ios))")
        }
    }

    func run() throws {
        let reader: CaptureReader
        let runs: [CapturedRun]
        let log: ObservationLog
        let mirrorVerdicts: [CapturedMirrorVerdict]
        let proxySite: Int
        let injected: Int
        try store.check(location: file, command: "report")
        let shown: String
        do {
            let opened = try openCapture(
                file, command: "report", selection: store.selection(filter: CaptureFilter(), runIDs: runID.map { [$0] }))
            reader = opened.reader
            shown = opened.shown
            runs = try reader.runs()
            if let runID, !runs.contains(where: { $0.id == runID }) {
                throw failure(
                    "atsproxy report: \(shown): no run \(runID) (runs: \(runs.map { String($0.id) }.joined(separator: ", ")))",
                    status: 2)
            }
            log = try ObservationLog(reading: reader, runID: runID)
            mirrorVerdicts = try reader.mirrorVerdicts(runID: runID)
            proxySite = try reader.proxySiteCount(runID: runID)
            injected = try reader.injectedCount(runID: runID)
        } catch let error as CaptureFileError {
            throw failure("atsproxy report: \(error)", status: 2)
        }
        var notes: [String] = []
        let judgedRuns = runs.filter { runID == nil || $0.id == runID }
        let captureIOS = judgedRuns.last?.settings["ios"].flatMap { Int($0) }
        let iosVersion = ios ?? captureIOS ?? IOSProfile.newest.rawValue
        guard let profile = IOSProfile.band(for: iosVersion) else {
            throw failure("atsproxy report: \(shown): the capture names iOS \(iosVersion), which has no ATS", status: 2)
        }
        for r in judgedRuns {
            let policy = r.settings["policy"] ?? "unknown"
            // Team store runs name their proxy's label and machine.
            let origin = [r.settings["label"].map { "label \($0)" }, r.settings["host"].map { "on \($0)" }]
                .compactMap { $0 }.joined(separator: ", ")
            notes.append(
                "run \(r.id)\(origin.isEmpty ? "" : " (\(origin))"): captured with policy \(policy) on iOS \(r.settings["ios"] ?? "?"), --ats "
                    + "\(r.settings["ats"] ?? "?")")
        }
        if let captureIOS, ios != nil, captureIOS != iosVersion {
            notes.append(
                "judged on iOS \(iosVersion), captured on iOS \(captureIOS): the handshakes offered what iOS "
                    + "\(captureIOS) offers, so version and suite verdicts may differ from a real iOS \(iosVersion)")
        }
        if let band = profile.bandNote(forVersion: iosVersion, verb: "judged") { notes.append(band) }
        if proxySite > 0 {
            notes.append(
                "\(proxySite) exchange\(proxySite == 1 ? "" : "s") with the proxy's own set-up site left out: not the "
                    + "app's traffic")
        }
        if injected > 0 {
            notes.append(
                "\(injected) exchange\(injected == 1 ? "" : "s") failed on purpose by a rule (--fault, --block-list) "
                    + "left out: the failure was injected, not the server's")
        }
        if log.observations.isEmpty {
            notes.append("the capture holds no exchanges\(proxySite > 0 ? " of the app's" : ""): nothing to judge")
        }

        var atsDictionary: PlistValue? = AppleDefaultPolicy.atsDictionary
        var source = AppleDefaultPolicy.source
        if let plist {
            let loaded: LoadedPolicy
            do {
                loaded = try PolicyLoader.load(path: plist)
            } catch {
                throw failure("atsproxy report: \(error)", status: 2)
            }
            atsDictionary = loaded.atsDictionary
            source = loaded.sourceDescription
            notes += loaded.notes
            if !loaded.misplacedATSKeys.isEmpty {
                notes.append(
                    "ATS keys outside NSAppTransportSecurity are never read: "
                        + loaded.misplacedATSKeys.joined(separator: ", "))
            }
        }
        var report = PolicyReport(
            observations: log.observations,
            policy: ReportPolicy(
                atsDictionary: atsDictionary, source: source, options: readings.policyOptions(profile: profile)),
            notes: notes)
        report.mirror = MirrorSection(verdicts: mirrorVerdicts)
        switch json ? .json : format {
        case .text: print(report.renderText(colour: isatty(STDOUT_FILENO) == 1), terminator: "")
        case .markdown: print(report.renderMarkdown(), terminator: "")
        case .json: print(try report.renderJSON())
        case .plist: print(report.suggestion.plistDocument, terminator: "")
        }
        if !report.fits { throw ExitCode(1) }
    }
}

extension ReportCommand.Format: Sendable {}
