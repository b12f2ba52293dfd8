import CaptureExport
import CaptureStore
import Foundation

/// Writes a HAR document to a file the way `har -o` and `run --har` both do: into `OUT.partial-PID` beside it, renamed
/// to OUT once complete, so a partial HAR is never left under OUT's name (the partial file is removed on an error).
enum HARFile {
    /// Writes `document`'s entries from `reader` to `output`; returns how many were written. The error says what
    /// went wrong with which file.
    static func write(_ document: HARDocument, from reader: CaptureReader, to output: String) throws(HARFileError) -> Int {
        let temporary = output + ".partial-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: 0o600])
        else {
            throw HARFileError("\(output): cannot create the file: \(String(cString: strerror(errno)))")
        }
        let handle: FileHandle
        do { handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary)) } catch {
            unlink(temporary)
            throw HARFileError("\(output): cannot open: \(error.localizedDescription)")
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
            throw HARFileError(problem)
        }
        return count
    }

    /// "1 entry", "2 entries": for the line that says what was written.
    static func entries(_ count: Int) -> String { count == 1 ? "1 entry" : "\(count) entries" }

    /// Why `output` cannot be written, checked before a run so that an hour of traffic is not lost at its end: its
    /// folder must exist and be writable, and `output` must not be a folder. Nil when it can be.
    static func problem(writing output: String) -> String? {
        let folder = (output as NSString).deletingLastPathComponent
        let shown = folder.isEmpty ? "." : folder
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: output, isDirectory: &isFolder), isFolder.boolValue {
            return "\(output) is a folder"
        }
        guard FileManager.default.fileExists(atPath: shown, isDirectory: &isFolder), isFolder.boolValue else {
            return "the directory \(shown) does not exist"
        }
        guard access(shown, W_OK) == 0 else { return "\(shown) is not writable: \(String(cString: strerror(errno)))" }
        return nil
    }
}

/// A HAR file that could not be written, with the file and the reason.
struct HARFileError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
