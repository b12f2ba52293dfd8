import Foundation
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `atsproxy run`'s startup as a user sees it: the built binary on an ephemeral loopback port, stopped as soon as
/// its banner is out. Policy warnings and notices are written before the banner, so stderr is complete by then.
@Suite struct RunCLITests {
    static let binary = LintCLITests.binary

    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    /// Runs `atsproxy run args…` with the CA in `caDir`, by default a fresh folder; stops it with `stopSignal` once
    /// it listens, after closing the reading end of its stderr when `closingStderr` (a closed terminal; `stderr` is
    /// then empty). A proxy that neither listens nor exits is stopped after 60 s, so a regression fails the test
    /// instead of hanging it.
    static func run(
        _ args: [String], environment: [String: String] = [:], caDir: String? = nil, stopSignal: Int32 = SIGTERM,
        closingStderr: Bool = false
    ) throws -> Run {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("RunCLITests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer {
            do { try FileManager.default.removeItem(at: dir) } catch {
                Issue.record("cleanup of \(dir.path): \(error)")
            }
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments =
            ["run", "--listen", "127.0.0.1:0", "--ca-dir", caDir ?? dir.appendingPathComponent("ca").path] + args
        var env = ProcessInfo.processInfo.environment
        env["CFNETWORK_DIAGNOSTICS"] = nil
        p.environment = env.merging(environment) { $1 }
        let out = Pipe()
        let err = Pipe()
        p.standardOutput = out
        p.standardError = err
        try p.run()
        let watchdog = DispatchWorkItem { if p.isRunning { p.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
        defer { watchdog.cancel() }
        var stdout = Data()
        while true {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }  // EOF: the proxy exited (a startup error)
            stdout.append(chunk)
            if String(decoding: stdout, as: UTF8.self).contains("Try:") {
                if closingStderr { try err.fileHandleForReading.close() }
                kill(p.processIdentifier, stopSignal)
                break
            }
        }
        stdout.append(out.fileHandleForReading.readDataToEndOfFile())
        let stderr = closingStderr ? Data() : err.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Run(
            status: p.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// `atsproxy run --help`, with its column wrapping undone so phrases can be searched.
    static func help() throws -> String {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: binary)
        p.arguments = ["run", "--help"]
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    static let badKeys = LintCLITests.xml(
        """
        <dict>
          <key>NSExceptionDomains</key>
          <dict>
            <key>https://scheme.com</key><dict/>
            <key>*.example.com</key><dict/>
            <key>Upper.example.com</key><dict/>
            <key>port.example.com:8443</key><dict/>
          </dict>
          <key>NSEExceptionDomains</key><dict/>
        </dict>
        """)

    // MARK: - Policy warnings are lint's findings

    /// Every lint finding appears in run's startup warnings with the same rule, severity, path and message.
    @Test func policyWarningsAreLintFindings() throws {
        try LintCLITests.withFiles(["keys.plist": Self.badKeys]) { dir in
            let plist = dir.appendingPathComponent("keys.plist").path
            let lint = try LintCLITests.lint([plist, "--format", "json"])
            let json = try JSONSerialization.jsonObject(with: Data(lint.stdout.utf8)) as? [String: Any]
            let findings = json?["findings"] as? [[String: Any]] ?? []
            #expect(findings.count >= 5, "\(lint.stdout)")
            let run = try Self.run(["--plist", plist])
            #expect(run.stdout.contains("ATSProxy listening"), "\(run.stderr)")
            for f in findings {
                let path = (f["keyPath"] as? [String] ?? []).joined(separator: "/")
                let rule = "\(f["severity"] ?? "")[\(f["ruleID"] ?? "")]"
                let line = "atsproxy: policy: \(rule) \(path): \(f["message"] ?? "")"
                #expect(run.stderr.contains(line + "\n"), "missing \(line) in\n\(run.stderr)")
            }
            #expect(run.stderr.contains("error[ATS012] NSAppTransportSecurity/NSExceptionDomains/https://scheme.com"))
            #expect(!run.stderr.contains("CIDR"), "\(run.stderr)")
            #expect(run.stderr.contains("Did you mean NSExceptionDomains?"), "\(run.stderr)")
            #expect(run.stderr.contains("atsproxy: policy: fixes: atsproxy lint \(plist)"), "\(run.stderr)")
        }
    }

    /// An .ipa whose NSAllowsArbitraryLoads is silenced by NSAllowsLocalNetworking: run says so, as lint does.
    @Test func ipaArbitraryLoadsIgnoredIsReported() throws {
        let info = LintCLITests.xml(
            """
            <dict>
              <key>CFBundleIdentifier</key><string>com.example.qa</string>
              <key>NSAppTransportSecurity</key>
              <dict>
                <key>NSAllowsArbitraryLoads</key><true/>
                <key>NSAllowsLocalNetworking</key><true/>
              </dict>
            </dict>
            """)
        try LintCLITests.withFiles(["Info.plist": info]) { dir in
            let ipa = dir.appendingPathComponent("QA.ipa").path
            try LintCLITests.zipIPA(ipa, app: "QA", infoPlist: dir.appendingPathComponent("Info.plist").path)
            let run = try Self.run(["--plist", ipa])
            #expect(
                run.stderr.contains("atsproxy: policy: error[ATS002] NSAppTransportSecurity/NSAllowsArbitraryLoads: "),
                "\(run.stderr)")
        }
    }

    /// Apple's defaults (no --plist) have nothing to warn about.
    @Test func noPlistNoPolicyWarnings() throws {
        let run = try Self.run([])
        #expect(run.stdout.contains("ATSProxy listening"), "\(run.stderr)")
        #expect(!run.stderr.contains("atsproxy: policy:"), "\(run.stderr)")
    }

    // MARK: - Stopping

    /// A script that stops the proxy as soon as its banner is out must not find its SIGTERM ignored (with Dispatch's
    /// signal sources, about one in four was, and the proxy ran on until killed).
    @Test func aSIGTERMRightAfterTheBannerStopsTheProxyGracefully() throws {
        for _ in 0..<10 {
            let started = ContinuousClock.now
            let run = try Self.run([])  // SIGTERM the moment "Try:" is read
            #expect(ContinuousClock.now - started < .seconds(10))
            #expect(run.status == 0, "\(run.stderr)")
            #expect(run.stderr.contains("atsproxy: shutting down"), "\(run.stderr)")
        }
    }

    /// A closed terminal sends SIGHUP: the proxy stops as on SIGTERM, flushing its logs, instead of being ended by
    /// the default action.
    @Test func aSIGHUPStopsTheProxyGracefully() throws {
        let run = try Self.run([], stopSignal: SIGHUP)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("atsproxy: shutting down"), "\(run.stderr)")
    }

    /// After a closed terminal's SIGHUP, stderr is gone too: writing the shutdown notice must not end the proxy
    /// (FileHandle.write(_:) traps on a failed write).
    @Test func aSIGHUPWithStderrGoneStillStopsGracefully() throws {
        let run = try Self.run([], stopSignal: SIGHUP, closingStderr: true)
        #expect(run.status == 0)
    }

    // MARK: - Options

    /// A version between bands is simulated with the band below, and the banner says which.
    @Test func iosVersionBetweenBandsIsNamedInTheBanner() throws {
        let run = try Self.run(["--ios", "16"])
        #expect(run.stdout.contains("iOS 14 behaviour band (for --ios 16)"), "\(run.stdout)\(run.stderr)")
        let exact = try Self.run(["--ios", "17"])
        #expect(exact.stdout.contains(", iOS 17, ATS enforce"), "\(exact.stdout)")
        #expect(try Self.help().contains("e.g. 16 → 14"))
    }

    @Test(arguments: [
        ("5", "CFNETWORK_DIAGNOSTICS=5 is outside 0 to 3; using level 3"),
        ("abc", "CFNETWORK_DIAGNOSTICS='abc' is not a level from 0 to 3; diagnostics are off"),
        ("-1", "CFNETWORK_DIAGNOSTICS=-1 is outside 0 to 3; using level 0 (off)"),
    ])
    func unusableDiagnosticsVariableIsWarned(value: String, warning: String) throws {
        let run = try Self.run([], environment: ["CFNETWORK_DIAGNOSTICS": value])
        #expect(run.stdout.contains("ATSProxy listening"), "\(run.stderr)")
        let lines = run.stderr.split(separator: "\n").map(String.init).filter { $0.contains("CFNETWORK_DIAGNOSTICS") }
        #expect(lines == ["atsproxy: warning: \(warning)"], "\(run.stderr)")
    }

    @Test(arguments: ["0", "2", "3", ""])
    func usableDiagnosticsVariableIsQuiet(value: String) throws {
        let run = try Self.run([], environment: ["CFNETWORK_DIAGNOSTICS": value])
        #expect(run.stdout.contains("ATSProxy listening"), "\(run.stderr)")
        #expect(!run.stderr.contains("CFNETWORK_DIAGNOSTICS"), "\(run.stderr)")
    }

    /// Help and validation name the same range.
    @Test func diagnosticsRangeAgreesWithHelp() throws {
        #expect(try Self.help().contains("CFNetwork-style diagnostics level, 0 (off) to 3"))
        let run = try Self.run(["--diagnostics", "4"])
        #expect(run.status == 64)
        #expect(run.stderr.contains("--diagnostics takes 0 (off) to 3 (got 4)"), "\(run.stderr)")
    }

    /// The yield count is bounded, so a typo cannot make an event loop spin for long before it sleeps; help and
    /// validation name the same range.
    @Test func yieldsBeforeSleepOutOfRangeIsAUsageError() throws {
        let help = try Self.help()
        #expect(help.contains("--yields-before-sleep <N> How many times a busy event-loop thread yields"), "\(help)")
        #expect(help.contains("before it sleeps (0 to 1000; 0 sleeps at once): cheaper"), "\(help)")
        #expect(help.contains("(a CPU-bound task shares the cores). (default: 12)"), "\(help)")
        for value in ["-1", "1001"] {
            let run = try Self.run(["--yields-before-sleep=\(value)"])
            #expect(run.status == 64)
            #expect(run.stderr.contains("--yields-before-sleep takes 0 to 1000 (got \(value))"), "\(run.stderr)")
        }
    }

    @Test func shutdownTimeoutOutOfRangeIsAUsageError() throws {
        let run = try Self.run(["--shutdown-timeout=3601"])
        #expect(run.status == 64)
        #expect(run.stderr.contains("--shutdown-timeout takes seconds, 0 to 3600 (got 3601.0)"), "\(run.stderr)")
    }

    /// A negative number after a space is the option's value, not a flag: it gets the option's own range message,
    /// as `--option=-1` does, instead of "Missing value".
    @Test(arguments: [
        (["--yields-before-sleep", "-1"], "--yields-before-sleep takes 0 to 1000 (got -1)"),
        (["--threads", "-3"], "--threads takes 1 to 256 (got -3)"),
        (["--diagnostics", "-1"], "--diagnostics takes 0 (off) to 3 (got -1)"),
        (["--handshake-timeout", "-5"], "--handshake-timeout takes seconds, more than 0 and at most 3600"),
        (["--ios", "-1"], "--ios must be 9 or later (got -1)"),
        (["--shutdown-timeout", "-1"], "--shutdown-timeout takes seconds, 0 to 3600 (got -1.0)"),
    ])
    func negativeNumbersReachValidation(args: [String], message: String) throws {
        let run = try Self.run(args)
        #expect(run.status == 64)
        #expect(run.stderr.contains("Error: \(message)"), "\(run.stderr)")
        #expect(!run.stderr.contains("Missing value"), "\(run.stderr)")
    }

    /// Taking the next word unconditionally leaves ordinary parsing alone: a flag after a numeric value is still a
    /// flag, and a flag where the number belongs is named as the bad value.
    @Test func numericOptionsStillParseAmongFlags() throws {
        let run = try Self.run(["--threads", "1", "--quiet", "--diagnostics", "0"])
        #expect(run.stdout.contains("(1 thread)"), "\(run.stdout)\(run.stderr)")
        let swallowed = try Self.run(["--threads", "--quiet"])
        #expect(swallowed.status == 64)
        let message = "The value '--quiet' is invalid for '--threads <threads>'"
        #expect(swallowed.stderr.contains(message), "\(swallowed.stderr)")
    }

    @Test func threadsHelpStatesItsDefaultOnce() throws {
        let help = try Self.help()
        let text = "--threads <threads> Event-loop threads, 1 to 256 (default: one per core). --"
        #expect(help.contains(text), "\(help)")
    }

    /// A thread count in the thousands would run out of descriptors ("epoll_create1 failed: Too many open files"):
    /// the range is a usage error naming the bounds the help states.
    @Test(arguments: ["0", "257", "100000"])
    func threadsOutOfRangeIsAUsageError(value: String) throws {
        let run = try Self.run(["--threads", value])
        #expect(run.status == 64)
        #expect(run.stderr.contains("Error: --threads takes 1 to 256 (got \(value))"), "\(run.stderr)")
        #expect(!run.stderr.contains("epoll"), "\(run.stderr)")
    }

    @Test(arguments: [
        ("/nonexistent/dir/x.jsonl", "the directory /nonexistent/dir does not exist"),
        ("/", "it is a directory, not a file"),
    ])
    func unwritableJSONLogIsExplained(path: String, reason: String) throws {
        let run = try Self.run(["--log-json", path])
        #expect(run.status != 0)
        #expect(!run.stdout.contains("listening"))
        #expect(run.stderr == "atsproxy run: error: --log-json: cannot create \(path): \(reason)\n", "\(run.stderr)")
    }

    /// The CA key opens every TLS connection of every device that trusts the CA: a key file others can read is
    /// warned about at startup, with the command that fixes it.
    @Test func caKeyReadableByOthersIsWarned() throws {
        let dir = try ScratchDirectory()
        let caDir = dir.path("my certs")
        #expect(try runATSProxy(["ca", "init", "--ca-dir", caDir]).status == 0)
        let key = caDir + "/atsproxy-ca-key.pem"
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: key)
        let exposed = try Self.run([], caDir: caDir)
        #expect(exposed.stdout.contains("ATSProxy listening"), "\(exposed.stderr)")
        let warning = exposed.stderr.split(separator: "\n").filter { $0.contains("atsproxy-ca-key.pem") }
        #expect(
            warning == [
                "atsproxy: warning: \(key) is readable by group or others (mode 0644). It is the key to every TLS "
                    + "connection of every device that trusts this CA; fix: chmod 600 '\(key)'"
            ], "\(exposed.stderr)")

        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: key)
        let private_ = try Self.run([], caDir: caDir)
        #expect(private_.stdout.contains("ATSProxy listening"), "\(private_.stderr)")
        #expect(!private_.stderr.contains("warning"), "\(private_.stderr)")
    }

    /// A port someone else listens on is named in the error, with the likely cause and the option that fixes it.
    @Test func portInUseNamesTheAddress() throws {
        let holder = try RawTCPServer(.silent)
        let address = "127.0.0.1:\(holder.port)"
        let run = try Self.run(["--listen", address])
        #expect(run.status == 1)
        #expect(!run.stdout.contains("listening"), "\(run.stdout)")
        #expect(
            run.stderr.hasSuffix(
                "atsproxy run: error: cannot listen on \(address): Address already in use (another program, maybe "
                    + "another atsproxy, uses that port; pick another with --listen)\n"), "\(run.stderr)")
        #expect(!run.stderr.contains("Usage:"), "\(run.stderr)")
    }

    /// A CA folder that cannot be made, or written to, is named with the step that failed and the system's
    /// reason, not Foundation's "The file doesn't exist."
    @Test func unusableCAFolderIsExplained() throws {
        let missing = try Self.run([], caDir: "/proc/nope")
        #expect(missing.status == 1)
        let reason = "cannot create the CA folder (No such file or directory)"
        #expect(missing.stderr == "atsproxy run: error: --ca-dir: /proc/nope: \(reason)\n", "\(missing.stderr)")

        let dir = try ScratchDirectory()
        let file = dir.path("not-a-folder")
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        let taken = try Self.run([], caDir: file)
        let fileReason = "cannot create the CA folder (a file has that name)"
        #expect(taken.stderr == "atsproxy run: error: --ca-dir: \(file): \(fileReason)\n", "\(taken.stderr)")

        // A folder that exists but takes no new files (procfs refuses them even to root).
        let closed = try Self.run([], caDir: "/proc/self")
        #expect(closed.status == 1)
        let key = "/proc/self/atsproxy-ca-key.pem"
        let keyReason = "cannot write the private key (create: "
        #expect(closed.stderr.hasPrefix("atsproxy run: error: --ca-dir: \(key): \(keyReason)"), "\(closed.stderr)")
    }

    /// With --auth, the banner's curl hint carries the real user name and a placeholder, never the password.
    @Test func bannerHintCarriesTheUserName() throws {
        let run = try Self.run(["--auth", "qa user:s3cret-pw"])
        #expect(run.stdout.contains("Try:     curl -x http://qa%20user:PASSWORD@127.0.0.1:"), "\(run.stdout)")
        #expect(!run.stdout.contains("s3cret-pw") && !run.stderr.contains("s3cret-pw"), "\(run.stdout)\(run.stderr)")
        let open = try Self.run([])
        #expect(open.stdout.contains("Try:     curl -x http://127.0.0.1:"), "\(open.stdout)")
    }

    /// The password can come from a file or the environment, so it is not in `ps`; either way it is used and
    /// never printed. Two sources at once are refused, naming both.
    @Test func credentialsFromAFileOrTheEnvironment() throws {
        let dir = try ScratchDirectory()
        let file = dir.path("proxy-auth")
        #expect(FileManager.default.createFile(atPath: file, contents: Data("qa:fr0m-file\n".utf8)))
        let fromFile = try Self.run(["--auth-file", file])
        #expect(fromFile.stdout.contains("curl -x http://qa:PASSWORD@127.0.0.1:"), "\(fromFile.stdout)\(fromFile.stderr)")
        let fromEnv = try Self.run([], environment: ["ATSPROXY_AUTH": "qa:fr0m-env"])
        #expect(fromEnv.stdout.contains("curl -x http://qa:PASSWORD@127.0.0.1:"), "\(fromEnv.stdout)")
        for run in [fromFile, fromEnv] {
            #expect(!(run.stdout + run.stderr).contains("fr0m"), "\(run.stdout)\(run.stderr)")
        }
        let both = try Self.run(["--auth-file", file], environment: ["ATSPROXY_AUTH": "qa:x"])
        #expect(both.status != 0)
        #expect(both.stderr.contains("give the proxy credentials once: --auth-file and ATSPROXY_AUTH are both set"),
                "\(both.stderr)")
        let missing = try Self.run(["--auth-file", dir.path("missing")])
        #expect(missing.stderr.contains("--auth-file \(dir.path("missing")): cannot read it"), "\(missing.stderr)")
    }

    /// `--print-nft`: the ruleset of transparent mode, printed before anything starts, and one nftables accepts
    /// (`nft -c` checks it against the kernel without loading it).
    @Test func printsTheNftablesRuleset() throws {
        let run = try Self.run(["--mode", "transparent:0.0.0.0:8443", "--print-nft", "--devices-interface", "wlan1"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout == """
            # atsproxy transparent mode: devices on wlan1 are sent to the proxy's port 8443.
            # Load: sudo nft -f FILE (root or CAP_NET_ADMIN; the proxy itself runs unprivileged).
            # Remove: sudo nft delete table inet atsproxy
            table inet atsproxy
            delete table inet atsproxy
            table inet atsproxy {
            \tchain prerouting {
            \t\ttype nat hook prerouting priority dstnat; policy accept;
            \t\tiifname "wlan1" tcp dport { 80, 443 } redirect to :8443
            \t\tiifname "wlan1" udp dport 443 redirect to :8443
            \t}
            }

            """)
        let checked = try runCommand("/usr/sbin/nft", ["-c", "-f", "-"], input: Data(run.stdout.utf8), limit: 20)
        #expect(checked.status == 0, "\(checked.stderrText)")
    }

    /// `--mode`: regular and transparent side by side on two ports; transparent alone on --listen's, with a banner
    /// that sends no one to a proxy setting or a set-up page its port does not serve.
    @Test func transparentBanner() throws {
        let both = try Self.run(["--mode", "regular", "--mode", "transparent:127.0.0.1:0"])
        #expect(both.stdout.contains("Try:     curl -x http://127.0.0.1:"), "\(both.stdout)")
        #expect(both.stdout.contains("\nTransparent: 127.0.0.1:"), "\(both.stdout)")
        #expect(both.stderr.contains("--mode transparent on 127.0.0.1: an nftables redirect"), "\(both.stderr)")
        let alone = try Self.run(["--mode", "transparent"])
        #expect(alone.stdout.contains("Try:     on a device behind this gateway, with no proxy setting"))
        #expect(alone.stdout.contains("Set-up:  install the CA on the device"), "\(alone.stdout)")
        #expect(!alone.stdout.contains("curl -x"))
    }

    /// Usage mistakes print `run`'s usage, other failures just the error; never the root command's usage.
    @Test(arguments: [
        (["--listen", "bogus"], "--listen expects HOST:PORT, got 'bogus'", true),
        (["--listen", "0.0.0.0:0"], "0.0.0.0 is not a loopback address", true),
        (["--listen", "0.0.0.0:0", "--allow-lan"], "--allow-lan without proxy credentials is an open proxy", true),
        (["--auth", "a:b", "--auth-file", "/dev/null"], "--auth and --auth-file are both set", true),
        (
            ["--listen", "127.0.0.1:99999"],
            "--listen '127.0.0.1:99999': the port 99999 is out of range (0–65535; 0 picks a free port)", true
        ),
        (["--listen", "70000"], "--listen '70000': the port 70000 is out of range (0–65535", true),
        (["--listen", "127.0.0.1:http"], "--listen '127.0.0.1:http': the port 'http' is not a number", true),
        (["--listen", "127.0.0.1:"], "--listen '127.0.0.1:': the port is missing after ':' (HOST:PORT)", true),
        (["--map", "bad"], "--map expects HOST=ADDR:PORT", true),
        (["--map", "a.*.com=127.0.0.1:1"], "--map 'a.*.com=127.0.0.1:1': a wildcard must be the whole first", true),
        (["--passthrough", "*x.com"], "--passthrough '*x.com': a wildcard must be the whole first label", true),
        (["--passthrough", "example.com:443"], "--passthrough 'example.com:443': a port is not part of a host", true),
        (["--passthrough", "10.0.0.0/8"], "--passthrough '10.0.0.0/8': address ranges (CIDR) are not supported", true),
        (["--map", "x.test=127.0.0.1:99999"], "--map 'x.test=127.0.0.1:99999': the port 99999 is out of range", true),
        (["--map", "x.test=127.0.0.1:abc"], "--map 'x.test=127.0.0.1:abc': the port 'abc' is not a number", true),
        (["--map", "x.test=127.0.0.1:"], "--map 'x.test=127.0.0.1:': the port is missing after ':'", true),
        (["--map", "*.x.test=*.y.test:443"], "the target must be an IP address or a host name, not a pattern", true),
        (
            ["--map", "x.test=127.0.0.1:1", "--map", "X.TEST.=127.0.0.1:2"],
            "--map 'x.test=127.0.0.1:1' and --map 'X.TEST.=127.0.0.1:2' both map x.test", true
        ),
        (
            ["--passthrough", "x.test", "--passthrough", "X.Test."],
            "--passthrough 'x.test' and --passthrough 'X.Test.' both name x.test", true
        ),
        (["--auth", "user:"], "--auth expects USER:PASSWORD; the password is empty", true),
        (["--auth", ":pass"], "--auth expects USER:PASSWORD; the user name is empty", true),
        (["--mode", "bogus"], "--mode 'bogus': expected regular, transparent[:ADDR:PORT] or wireguard[:ADDR:PORT]", true),
        (["--mode", "regular", "--mode", "regular"], "--mode regular is given twice", true),
        (["--mode", "regular:127.0.0.1:1"], "--mode regular takes no address: it listens on --listen", true),
        (["--mode", "transparent", "--mode", "regular"], "cannot share --listen's port: give transparent", true),
        (["--mode", "wireguard", "--mode", "wireguard:127.0.0.1:0"], "--mode wireguard is given twice", true),
        (["--mode", "wireguard:bogus"], "--mode wireguard:ADDR:PORT expects HOST:PORT, got 'bogus'", true),
        (["--wireguard-devices", "2"], "--wireguard-devices goes with --mode wireguard", true),
        (["--mode", "wireguard:127.0.0.1:0", "--wireguard-devices", "0"], "--wireguard-devices 0: expected 1 to 250", true),
        (["--mode", "wireguard:127.0.0.1:0", "--wireguard-devices", "251"], "--wireguard-devices 251: expected 1 to", true),
        (["--mode", "transparent:127.0.0.1:99999"], "--mode 'transparent:127.0.0.1:99999': the port 99999", true),
        (["--mode", "transparent:bogus"], "--mode transparent:ADDR:PORT expects HOST:PORT, got 'bogus'", true),
        (["--print-nft"], "--print-nft goes with --mode transparent", true),
        (["--mode", "transparent", "--print-nft"], "--print-nft needs the transparent port: 0 is chosen", true),
        (["--mode", "transparent", "--devices-interface", "wl an0"], "--devices-interface 'wl an0' is no", true),
        (["--trust-ca", "/nonexistent/ca.pem"], "--trust-ca /nonexistent/ca.pem: cannot read the file", false),
        (["--trust-ca", LintCLITests.config("media-server.plist")], "media-server.plist: no PEM certificate", false),
    ])
    func errorsDoNotPrintTheRootUsage(args: [String], message: String, usage: Bool) throws {
        let run = try Self.run(args)
        #expect(run.status != 0)
        #expect(run.stderr.contains(message), "\(run.stderr)")
        #expect(!run.stderr.contains("<subcommand>"), "\(run.stderr)")
        #expect(run.stderr.contains("Usage: atsproxy run") == usage, "\(run.stderr)")
    }
}
