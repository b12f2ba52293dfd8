import Foundation
import ProxyCore
import ProxyTrace

/// Where sessions' logs go: one console line per exchange on stdout (coloured only on a terminal), notices and
/// CFNetwork-style records on stderr, JSON events to a file. Shared by every loop thread.
public final class ProxyLogSink: @unchecked Sendable {
    // @unchecked: all mutable state (the writer's sequence number, the file handle) is guarded by `lock`.
    private let lock = NSLock()
    private var diagnostics: DiagnosticsWriter
    private let jsonFile: FileHandle?
    private let colour: Bool
    private let quiet: Bool

    /// - Parameters:
    ///   - diagnosticsLevel: 0 (off) to 3.
    ///   - jsonPath: `--log-json FILE`, created or truncated.
    ///   - quiet: no per-exchange console lines (benchmarks).
    public init(diagnosticsLevel: Int, jsonPath: String?, quiet: Bool) throws {
        diagnostics = DiagnosticsWriter(level: diagnosticsLevel)
        if let jsonPath {
            guard FileManager.default.createFile(atPath: jsonPath, contents: nil) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: jsonPath])
            }
            jsonFile = FileHandle(forWritingAtPath: jsonPath)
        } else {
            jsonFile = nil
        }
        colour = isatty(STDOUT_FILENO) == 1
        self.quiet = quiet
    }

    func write(_ entry: ProxyLog) {
        // Quiet drops every exchange line: no need to take the lock that all loop threads share, once per exchange.
        if quiet, case .exchange = entry { return }
        lock.lock()
        defer { lock.unlock() }
        switch entry {
        case .exchange(let summary):
            if !quiet { FileHandle.standardOutput.write(Data((summary.consoleLine(colour: colour) + "\n").utf8)) }
        case .notice(let text):
            FileHandle.standardError.write(Data(("atsproxy: " + text + "\n").utf8))
        case .diagnostics(let record):
            if let text = diagnostics.render(record, at: TraceTime(unixTime: Date().timeIntervalSince1970)) {
                FileHandle.standardError.write(Data(text.utf8))
            }
        case .event(let event):
            guard let jsonFile else { return }
            do { jsonFile.write(Data((try event.jsonLine() + "\n").utf8)) } catch {
                FileHandle.standardError.write(Data("atsproxy: cannot encode a JSON log event: \(error)\n".utf8))
            }
        }
    }
}
