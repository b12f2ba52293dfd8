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

    @Argument(help: "The capture file (atsproxy run --capture).")
    var path: String

    @OptionGroup var filterOptions: CaptureFilterOptions

    @Option(name: [.customShort("o"), .customLong("output")], help: "Write the HAR to this file instead of stdout.")
    var output: String?

    func run() throws {
        let filter = try filterOptions.filter(command: "har")
        let reader = try openCapture(path, command: "har")
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
        // A partial HAR is never left under OUT's name: written beside it, then renamed.
        let temporary = output + ".partial-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: 0o600])
        else {
            throw failure(
                "atsproxy har: error: \(output): cannot create the file: \(String(cString: strerror(errno)))", status: 2)
        }
        let handle: FileHandle
        do { handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary)) } catch {
            unlink(temporary)
            throw failure("atsproxy har: error: \(output): cannot open: \(error.localizedDescription)", status: 2)
        }
        var problem: String?
        var count = 0
        let out = BufferedOutput(handle)
        do {
            count = try document.write(from: reader, to: out.write)
            try out.flush()
        } catch let error as CaptureFileError {
            problem = error.description
        } catch {
            problem = "\(output): cannot write: \(error.localizedDescription)"
        }
        do { try handle.close() } catch {
            problem = problem ?? "\(output): cannot write: \(error.localizedDescription)"
        }
        if problem == nil, rename(temporary, output) != 0 {
            problem = "\(output): cannot rename the finished file into place: \(String(cString: strerror(errno)))"
        }
        if let problem {
            unlink(temporary)
            throw failure("atsproxy har: error: \(problem)", status: 2)
        }
        FileHandle.standardError.write(Data("atsproxy har: \(count) entries written to \(output)\n".utf8))
    }
}
