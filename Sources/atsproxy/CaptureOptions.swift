import ArgumentParser
import CaptureStore
import Foundation
import ProxyServer

/// `atsproxy run`'s capture options: `--capture [FILE]`, `--capture-bodies SIZE` and `--har FILE`.
struct CaptureOptions: ParsableArguments {
    @Option(
        name: .customLong("capture"),
        help: ArgumentHelp(
            "Keep every exchange (heads, timings, TLS, ATS decision, bodies, trace) in a SQLite capture FILE; "
                + "without FILE, captures/<date-time>.atscap. An existing capture gets this run appended. "
                + "A postgresql:// URI writes to the team store instead (docs/team-store.md). Off by "
                + "default: bodies can hold users' secrets.",
            valueName: "FILE|URI"))
    var capture: String?

    @Option(
        name: .customLong("run-label"),
        help: ArgumentHelp(
            "With --capture: a label for this run (a device, a tester, a CI job), for `report --label` and the "
                + "team store's listings.",
            valueName: "NAME"))
    var runLabel: String?

    @Option(
        name: .customLong("capture-bodies"),
        help: ArgumentHelp(
            "With --capture (or --web): bytes kept of each request and response body (e.g. 64k, 1m; 0 for none; "
                + "default 1m). "
                + "A cut body is marked with its real size.",
            valueName: "SIZE"))
    var captureBodies: ByteSize?

    @Option(
        name: .customLong("har"),
        help: ArgumentHelp(
            "At exit (Ctrl-C, SIGTERM), write this run's exchanges to FILE as HAR 1.2 with the ATS verdicts in _ats, "
                + "as `atsproxy har` does. Without --capture the run captures to a temporary file, deleted after.",
            valueName: "FILE"))
    var har: String?

    /// The value `--capture` gets when it is given without a file name (see `expandingBareCapture`).
    static let defaultMarker = "\u{1}default"

    static let defaultBodyLimit = 1 << 20

    var bodyLimit: Int { captureBodies?.bytes ?? Self.defaultBodyLimit }

    /// The capture file's path: FILE, or a new `captures/<date-time>.atscap` (the folder made 0700 when missing).
    func resolvedPath(now: Date = Date()) throws(CaptureFileError) -> String? {
        guard let capture else { return nil }
        guard capture == Self.defaultMarker else { return capture }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyyMMdd-HHmmss"
        let path = "captures/" + formatter.string(from: now) + ".atscap"
        if mkdir("captures", 0o700) != 0 && errno != EEXIST {
            throw CaptureFileError(path: path, problem: .cannotOpen(String(cString: strerror(errno))))
        }
        return path
    }

    /// `arguments` with a bare `--capture` or `--web` (last, or followed by another option) given its default
    /// marker, as `--capture=`: argument-parser has no options whose value may be left out.
    static func expandingBareCapture(_ arguments: [String]) -> [String] {
        let bare = ["--capture": defaultMarker, "--web": WebOptions.defaultMarker]
        var out: [String] = []
        var i = 0
        while i < arguments.count {
            let word = arguments[i]
            if word == "--" {
                out += arguments[i...]
                break
            }
            if let marker = bare[word], i + 1 == arguments.count || arguments[i + 1].hasPrefix("-") {
                out.append(word + "=" + marker)
            } else {
                out.append(word)
            }
            i += 1
        }
        return out
    }
}

/// A size in bytes: `65536`, `64k`, `1m` (binary multiples: k = 1024).
struct ByteSize: ExpressibleByArgument, Equatable {
    var bytes: Int

    init(bytes: Int) { self.bytes = bytes }

    init?(argument: String) {
        let text = argument.lowercased()
        let units: [(String, Int)] = [("kib", 1 << 10), ("mib", 1 << 20), ("gib", 1 << 30), ("k", 1 << 10),
                                      ("m", 1 << 20), ("g", 1 << 30), ("b", 1)]
        var number = Substring(text)
        var multiple = 1
        for (suffix, value) in units where text.hasSuffix(suffix) {
            number = text.dropLast(suffix.count)
            multiple = value
            break
        }
        guard !number.isEmpty, number.allSatisfy(\.isASCII), let n = Int(number), n >= 0,
            n <= Int(Int32.max) / multiple
        else { return nil }
        bytes = n * multiple
    }
}
