import ArgumentParser
import CaptureStore
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The options the readers (`show`, `har`, `report`, `view`) take for the team store: which runs and which time.
/// A capture file ignores none of them silently: they are refused with a file (`check(location:)`).
struct TeamStoreOptions: ParsableArguments {
    @Option(
        name: .customLong("label"),
        help: ArgumentHelp("With a postgresql:// store: only runs with this --run-label (repeatable).", valueName: "NAME"))
    var labels: [String] = []

    @Option(
        name: .customLong("since"),
        help: ArgumentHelp(
            "With a postgresql:// store: exchanges started at or after TIME: an age (30m, 24h, 7d), a date "
                + "(2026-12-01), an ISO 8601 time or Unix seconds.",
            valueName: "TIME"))
    var since: TimeSpec?

    @Option(
        name: .customLong("until"),
        help: ArgumentHelp("With a postgresql:// store: exchanges started before TIME (as --since).", valueName: "TIME"))
    var until: TimeSpec?

    var isEmpty: Bool { labels.isEmpty && since == nil && until == nil }

    func selection(filter: CaptureFilter, runIDs: [Int64]? = nil) -> TeamStoreSelection {
        TeamStoreSelection(
            filter: filter, runIDs: runIDs, labels: labels.isEmpty ? nil : labels, since: since?.seconds,
            until: until?.seconds)
    }

    /// --label, --since and --until select in the team store; a capture file is read whole.
    func check(location: String, command: String) throws {
        if !isEmpty, !PostgresLocation.isURI(location) {
            throw failure(
                "atsproxy \(command): error: --label, --since and --until select runs of a postgresql:// store; "
                    + "for a capture file use --filter (run:N)", status: 2)
        }
    }
}

extension TeamStoreSelection {
    func with(exchangeIDs: [Int64]?, newest: Int?) -> TeamStoreSelection {
        var copy = self
        copy.exchangeIDs = exchangeIDs
        copy.newest = newest
        return copy
    }
}

/// A point in time given on the command line: an age before now (`30m`, `24h`, `7d`), a date, an ISO 8601 time,
/// or Unix seconds.
struct TimeSpec: ExpressibleByArgument, Equatable {
    var seconds: Double

    init?(argument: String) {
        self.init(argument, now: Date().timeIntervalSince1970)
    }

    init?(_ text: String, now: Double) {
        if let age = TimeSpec.duration(text) {
            seconds = now - age
        } else if let unix = Double(text), text.allSatisfy({ $0.isNumber || $0 == "." }) {
            seconds = unix
        } else if let date = TimeSpec.date(text) {
            seconds = date
        } else {
            return nil
        }
    }

    /// `30s`, `90m`, `24h`, `7d`, `2w` in seconds.
    static func duration(_ text: String) -> Double? {
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400]
        guard let unit = text.last.flatMap({ units[$0] }), let n = Double(text.dropLast()), n >= 0, n.isFinite else {
            return nil
        }
        return n * unit
    }

    private static func date(_ text: String) -> Double? {
        let iso = ISO8601DateFormatter()
        if let date = iso.date(from: text) { return date.timeIntervalSince1970 }
        let day = DateFormatter()
        day.locale = Locale(identifier: "en_US_POSIX")
        day.timeZone = TimeZone(identifier: "UTC")
        day.dateFormat = "yyyy-MM-dd"
        return day.date(from: text)?.timeIntervalSince1970
    }
}

/// A capture to read: the file itself, or for a postgresql:// store a snapshot of the selection copied into a
/// temporary capture file (`PostgresSnapshot`), removed when the command exits.
struct OpenedCapture {
    let reader: CaptureReader
    /// The file, or the store's URI with its password hidden: what messages name.
    let shown: String
}

/// Opens `location` for reading. For the team store, the selection is copied first, with progress on a terminal.
func openCapture(
    _ location: String, command: String, selection: @autoclosure () -> TeamStoreSelection
) throws -> OpenedCapture {
    guard let store = PostgresLocation(location) else {
        return OpenedCapture(reader: try openCapture(location, command: command), shown: location)
    }
    let path = try TemporaryCaptures.path(command: command)
    let progress = TerminalProgress(verb: "reading \(store.redacted)")
    do {
        try PostgresSnapshot.copy(from: store, selection: selection(), into: path, progress: progress.update)
        progress.finish()
        return OpenedCapture(reader: try CaptureReader(path: path), shown: store.redacted)
    } catch {
        progress.finish()
        throw failure("atsproxy \(command): error: \(error)", status: 2)
    }
}

/// Temporary capture files (snapshots of the team store) in one private folder, removed at exit.
enum TemporaryCaptures {
    nonisolated(unsafe) private static var folder: String?

    static func path(command: String) throws -> String {
        if folder == nil {
            let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
            var template = Array((base as NSString).appendingPathComponent("atsproxy-store-XXXXXX").utf8CString)
            guard let made = mkdtemp(&template) else {
                throw failure("atsproxy \(command): error: cannot make a temporary folder in \(base)", status: 2)
            }
            folder = String(cString: made)
            atexit { TemporaryCaptures.removeAll() }
        }
        return ((folder ?? "") as NSString).appendingPathComponent("store-\(UUID().uuidString.prefix(8)).atscap")
    }

    static func removeAll() {
        guard let folder else { return }
        do { try FileManager.default.removeItem(atPath: folder) } catch {
            FileHandle.standardError.write(Data("atsproxy: cannot remove \(folder): \(error)\n".utf8))
        }
    }
}

/// "reading postgresql://…: 12,000 of 50,000 exchanges" on one line of a terminal's standard error, redrawn at
/// most ten times a second; nothing when standard error is not a terminal (piped, in CI).
final class TerminalProgress {
    private let verb: String
    private let noun: String
    private let enabled: Bool
    private var lastDrawn = 0.0
    private var drawn = false

    init(verb: String, noun: String = "exchanges", enabled: Bool = isatty(STDERR_FILENO) == 1) {
        self.verb = verb
        self.noun = noun
        self.enabled = enabled
    }

    func update(_ done: Int, _ total: Int) {
        guard enabled else { return }
        let now = Date().timeIntervalSince1970
        guard now - lastDrawn >= 0.1 || done == total else { return }
        lastDrawn = now
        drawn = true
        let percent = total > 0 ? " (\(done * 100 / total)%)" : ""
        FileHandle.standardError.write(Data("\r\u{1B}[K\(verb): \(done) of \(total) \(noun)\(percent)".utf8))
    }

    func finish() {
        guard enabled, drawn else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
        drawn = false
    }
}
