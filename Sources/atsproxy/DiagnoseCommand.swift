import ATSDiagnose
import ATSPolicy
import ArgumentParser
import Foundation
import PolicyLoader
import TLSCore

#if canImport(Glibc)
import Glibc
#endif

/// `atsproxy diagnose URL`: nscurl's `--ats-diagnostics` on Linux, plus why and the narrowest fix.
struct DiagnoseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "diagnose",
        abstract: "Run nscurl --ats-diagnostics' test matrix against a server with a simulated iOS TLS stack.",
        discussion: """
            Prints nscurl's seven sections (PASS/FAIL per ATS dictionary), then why the default connection \
            passes or fails (what the server offers against what ATS needs) and the narrowest exception as a \
            ready-to-paste plist snippet, or a plain statement that no exception can help.

            Exit status: 0 when the default ATS connection passes, 1 when it fails, 2 when the diagnosis cannot \
            run (bad URL, unreadable file, a server that cannot be resolved or connected to, or that gives no \
            probe's TLS ClientHello a TLS answer: it stays silent for --timeout, closes the connection or answers \
            with bytes that are not TLS), 64 when the command line is malformed. With --fail-on-policy, 0 and 1 \
            judge the app's own policy (--plist) instead of the default connection: CI fails when the app would.
            """)

    @Argument(help: "The https:// URL to test.")
    var url: String

    @Flag(name: .long, help: "Show each ATS dictionary and the NSError a failing load would report.")
    var verbose = false

    @Option(name: .long, help: "Also judge the URL with this app's policy (Info.plist, ATS plist, .app or .ipa).")
    var plist: String?

    // Numeric options take the next word whatever it looks like (.unconditional), so `--timeout -1` reaches
    // validate() and its range message; by default argument-parser reads `-1` as a flag ("Missing value").
    @Option(
        name: .long, parsing: .unconditional,
        help: "iOS version to simulate (9 or later; mapped to the bands 9, 10, 14, 17, 26).")
    var ios: Int = IOSProfile.newest.rawValue

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    @Option(name: .customLong("trust-ca"), help: "A root the simulated device trusts (PEM), repeatable.")
    var trustCA: [String] = []

    @Option(
        name: .customLong("connect-to"),
        help: ArgumentHelp(
            "Connect to ADDR, or ADDR:PORT, instead of the URL's host and port (IPv6: [::1]:8443); SNI, "
                + "certificate checks and ATS still use the URL's host.",
            valueName: "addr[:port]"))
    var connectTo: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Seconds one connection attempt may take, TCP connect and TLS handshake together (a row that runs "
                + "out fails as the app's NSURLErrorTimedOut -1001)."))
    var timeout: Double = 10

    @Flag(
        name: .customLong("fail-on-policy"),
        help: ArgumentHelp(
            "With --plist: exit 1 when the app's own policy refuses the connection, 0 when it allows it (the "
                + "default connection's result no longer sets the status)."))
    var failOnPolicy = false

    @OptionGroup var readings: PolicyReadingOptions

    func validate() throws {
        if failOnPolicy && plist == nil {
            throw ValidationError("--fail-on-policy judges the app's own policy: give it with --plist")
        }
        guard IOSProfile.band(for: ios) != nil else {
            throw ValidationError("--ios must be 9 or later (got \(ios))")
        }
        // The upper bound keeps the millisecond poll timeouts in range.
        if let connectTo {
            do {
                _ = try ConnectAddress(parsing: connectTo)
            } catch {
                throw ValidationError(error.description)
            }
        }
        guard timeout > 0, timeout <= 86_400 else {
            throw ValidationError("--timeout must be more than 0 and at most 86400 seconds (got \(timeout))")
        }
    }

    func run() throws {
        guard let profile = IOSProfile.band(for: ios) else { throw ExitCode.validationFailure }
        var roots: [Certificate] = []
        for path in trustCA {
            do {
                roots += try Certificate.chain(pem: String(contentsOfFile: path, encoding: .utf8))
            } catch {
                throw failure("atsproxy diagnose: --trust-ca \(path): \(error)", status: 2)
            }
        }
        var app: (policy: ATSPolicy, source: String)?
        if let plist {
            do {
                let loaded = try PolicyLoader.load(path: plist)
                app = (
                    ATSPolicy(atsDictionary: loaded.atsDictionary, options: readings.policyOptions(profile: profile)),
                    loaded.sourceDescription
                )
            } catch {
                throw failure("atsproxy diagnose: --plist \(plist): \(error)", status: 2)
            }
        }
        let showProgress = isatty(STDERR_FILENO) == 1 && !json
        let report: DiagnoseReport
        do {
            let options = DiagnoseOptions(
                url: url, profile: profile, policyOptions: readings.policyOptions(profile: profile), userRoots: roots,
                appPolicy: app, connectAddress: try connectTo.map { text throws(DiagnoseError) in
                    try ConnectAddress(parsing: text)
                }, timeout: timeout)
            let diagnoser = try Diagnoser(options: options) { line in
                guard showProgress else { return }
                FileHandle.standardError.write(Data("\r\u{1B}[K\(line)…".utf8))
            }
            report = try diagnoser.run()
        } catch {
            if showProgress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            throw failure("atsproxy diagnose: \(error)", status: 2)
        }
        if showProgress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        if json {
            print(try report.renderJSON())
        } else {
            print(report.renderText(verbose: verbose), terminator: "")
        }
        if failOnPolicy {
            if report.appPolicy?.allowed != true { throw ExitCode(1) }
        } else if !report.defaultPasses {
            throw ExitCode(1)
        }
    }

}
