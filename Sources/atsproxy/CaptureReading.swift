import ArgumentParser
import CaptureStore
import Foundation

/// The options `show` and `har` share: which exchanges of the capture (`--filter`).
struct CaptureFilterOptions: ParsableArguments {
    @Option(
        name: .customLong("filter"),
        help: ArgumentHelp(
            "Which exchanges: e.g. 'host:api.example.com status:4xx', 'problems', '-verdict:ok or method:POST'.",
            discussion: "Keys: host, status, verdict, method, text, code, run; words: problems, not, and, or, ( ). "
                + "See docs/capture.md.",
            valueName: "EXPR"))
    var expression: String?

    /// The parsed filter; a syntax error goes to stderr with its column, and the exit status is 2.
    func filter(command: String) throws -> CaptureFilter {
        guard let expression else { return CaptureFilter() }
        do { return try CaptureFilter(parsing: expression) } catch {
            throw failure("atsproxy \(command): error: \(error.description)", status: 2)
        }
    }
}

/// Opens a capture for reading; a file that cannot be read is an error naming it, with exit status 2.
func openCapture(_ path: String, command: String) throws -> CaptureReader {
    do { return try CaptureReader(path: path) } catch {
        throw failure("atsproxy \(command): error: \(error.description)", status: 2)
    }
}

/// Standard output in 64 KiB writes, for listings and exports that may run to gigabytes.
final class BufferedOutput {
    private var buffer: [UInt8] = []
    private let handle: FileHandle

    init(_ handle: FileHandle = .standardOutput) {
        self.handle = handle
        buffer.reserveCapacity(1 << 16)
    }

    func write(_ text: String) throws {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { try flush() }
    }

    func flush() throws {
        guard !buffer.isEmpty else { return }
        try handle.write(contentsOf: buffer)
        buffer.removeAll(keepingCapacity: true)
    }
}
