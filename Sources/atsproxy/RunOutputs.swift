import CaptureStore
import Foundation
import ProxyServer
import ProxyTrace
import WebView

/// Where `run` writes what it sees: the log (console, `--log-json`), the capture (`--capture`, or a temporary one
/// for `--web` and `--har`) and the web view's live feed. Opened first, before the CA, so that an unusable path
/// fails first and alone, and nothing is written to a file that is not a capture.
///
/// The run's one cleanup path is `end()`: whatever stops the run (a failed start after the capture was opened, or
/// the end of a run that listened), it closes the web view's readers, then the capture: closed (its `ended` time
/// set, the file back in rollback-journal mode) when the proxy listened, else discarded (a file the run made is
/// removed, an existing one loses the run's row), so a failed start leaves nothing a reader could take for a live
/// run. A temporary capture is removed last.
final class RunOutputs {
    let log: ProxyLogSink
    let capture: CaptureSink?
    /// The capture made for `--web` or `--har` without `--capture`, removed at the end.
    let temporaryCapture: String?
    /// The web view's live feed (with `--web`).
    let feed: LiveFeed?
    /// Readers the web view holds on the capture: closed before it, whose last step needs the only connection.
    var webReaders: [CaptureReader] = []
    /// Set once the proxy listens and its banner is out: from then on the run counts, and its capture is closed,
    /// not discarded.
    var listening = false
    private var captureEnded = false

    private init(log: ProxyLogSink, capture: CaptureSink?, temporaryCapture: String?, feed: LiveFeed?) {
        self.log = log
        self.capture = capture
        self.temporaryCapture = temporaryCapture
        self.feed = feed
    }

    /// Opens the log, then the capture (checking `--har` against it first).
    static func open(_ command: RunCommand, _ start: RunStart) throws -> RunOutputs {
        let log: ProxyLogSink
        do {
            log = try ProxyLogSink(diagnosticsLevel: start.level, jsonPath: command.logJSON, quiet: command.quiet)
        } catch {
            throw failure("atsproxy run: error: --log-json: \(error)")
        }
        let options = command.captureOptions
        // The HAR is written at exit: a folder that cannot take it is said now, not after the session.
        if let har = options.har {
            if let problem = HARFile.problem(writing: har) { throw failure("atsproxy run: error: --har: \(problem)") }
            // The HAR replaces its file when complete: never the capture it is read from.
            if let capture = options.capture,
                URL(fileURLWithPath: har).standardizedFileURL == URL(fileURLWithPath: capture).standardizedFileURL
            {
                throw failure("atsproxy run: error: --har and --capture name the same file (\(har))")
            }
        }
        let store = options.capture.flatMap(PostgresLocation.init)
        if let store, start.webAddress != nil || options.har != nil {
            throw failure(
                "atsproxy run: error: --web and --har read a capture file; with the team store "
                    + "(\(store.redacted)) use `atsproxy view URL` and `atsproxy har URL --run ID` instead")
        }
        var temporaryCapture: String?
        let capture: CaptureSink?
        do {
            var path = store == nil ? try options.resolvedPath() : nil
            // The web view reads the capture: without --capture it gets a temporary one.
            if path == nil, store == nil, start.webAddress != nil || options.har != nil {
                path = RunCommand.temporaryCapturePath()
                temporaryCapture = path
            }
            let run = runInfo(command, caFile: start.caFile, teamStore: store != nil)
            let writer: (any CaptureDestination)?
            if let store {
                writer = try PostgresCaptureWriter.open(store, run: run)
            } else if let path {
                let file = try CaptureWriter.open(path: path, run: run)
                if !file.exclusive {
                    ProxyLogSink.writeToStandardError(
                        "atsproxy: warning: --capture: \(path): its file system has no flock, so another atsproxy "
                            + "writing the same file would not be refused\n")
                }
                writer = file
            } else {
                writer = nil
            }
            capture = writer.map { writer in CaptureSink(writer: writer) { text in log.notice(text) } }
        } catch {
            throw failure("atsproxy run: error: --capture: \(error)")
        }
        if let capture { log.add(capture) }
        let feed = start.webAddress == nil ? nil : LiveFeed()
        if let feed { log.add(feed) }
        return RunOutputs(log: log, capture: capture, temporaryCapture: temporaryCapture, feed: feed)
    }

    /// Closes the web view's readers and the capture, once: closed when the proxy listened, discarded otherwise.
    /// Before a `--har` is read from the capture; `end()` calls it too.
    func endCapture() {
        guard !captureEnded else { return }
        captureEnded = true
        // Before the capture's own close: folding its write-ahead log back into the file needs the only connection.
        for reader in webReaders {
            do { try reader.close() } catch { ProxyLogSink.writeToStandardError("atsproxy: --web: \(error)\n") }
        }
        webReaders = []
        if listening { capture?.close() } else { capture?.discard() }
    }

    /// The run's one cleanup path, however it stops: the capture ended (`endCapture()`), then a temporary capture
    /// removed with SQLite's files beside it.
    func end() {
        endCapture()
        if let temporaryCapture { CaptureWriter.removeFiles(at: temporaryCapture) }
    }

    /// The run's row in the capture: when it started and the settings `view` and `report` show for it.
    private static func runInfo(_ command: RunCommand, caFile: String, teamStore: Bool) -> CaptureRunInfo {
        var settings = [
            "policy": command.plist ?? "Apple's defaults", "ios": String(command.iosVersion),
            "ats": command.ats.rawValue, "block": command.block.rawValue, "listen": command.listen, "ca": caFile,
        ]
        // The team store's runs come from many machines: each says which.
        if teamStore { settings["host"] = ProcessInfo.processInfo.hostName }
        if let label = command.captureOptions.runLabel { settings["label"] = label }
        return CaptureRunInfo(
            started: Date().timeIntervalSince1970, atsproxyVersion: ATSProxyCommand.configuration.version,
            bodyLimit: command.captureOptions.bodyLimit, settings: settings)
    }
}
