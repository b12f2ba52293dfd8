import ArgumentParser
import CaptureExport
import CaptureStore
import Foundation

/// `atsproxy har FILE [--filter EXPR] [-o OUT]`: a capture as a HAR 1.2 file, with the ATS verdicts in `_ats` and
/// the TLS of both legs in `_tls` (docs/capture.md says how each kind of exchange is written).
///
/// Exit status: 0 written, 2 when the capture cannot be read, the filter does not parse, or OUT cannot be written.
struct HarCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "har",
        abstract: "Export a capture file as HAR 1.2, with ATS verdicts and TLS facts in custom fields.",
        discussion: """
            Writes to stdout unless -o is given (then to a temporary file renamed to OUT once complete). Exit \
            status: 0 written, 2 an unreadable capture, a filter that does not parse, or an OUT that cannot be \
            written.
            """)

    @Argument(help: "The capture file (atsproxy run --capture), or a postgresql:// team store.")
    var path: String

    @OptionGroup var filterOptions: CaptureFilterOptions

    @OptionGroup var store: TeamStoreOptions

    @Option(name: [.customShort("o"), .customLong("output")], help: "Write the HAR to this file instead of stdout.")
    var output: String?

    func run() throws {
        let filter = try filterOptions.filter(command: "har")
        try store.check(location: path, command: "har")
        let reader = try openCapture(path, command: "har", selection: store.selection(filter: filter)).reader
        let document = HARDocument(creatorVersion: ATSProxyCommand.configuration.version, filter: filter)
        guard let output else {
            let out = BufferedOutput()
            do {
                try document.write(from: reader, to: out.write)
                try out.flush()
            } catch let error as CaptureFileError {
                throw failure("atsproxy har: error: \(error.description)", status: 2)
            } catch {
                throw failure("atsproxy har: error: cannot write to stdout: \(error)", status: 2)
            }
            return
        }
        let count: Int
        do { count = try HARFile.write(document, from: reader, to: output) } catch {
            throw failure("atsproxy har: error: \(error)", status: 2)
        }
        FileHandle.standardError.write(Data("atsproxy har: \(HARFile.entries(count)) written to \(output)\n".utf8))
    }
}
