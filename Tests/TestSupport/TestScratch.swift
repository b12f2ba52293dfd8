import Foundation

/// Folders for the files a test writes (captures, HAR exports, fixtures), all under one folder per test process that
/// is removed when the process exits: a test need not remove its own, and a run leaves nothing behind in the
/// temporary directory (a crashed run leaves its one folder, named with its pid).
public enum TestScratch {
    /// A new, empty folder named `prefix-XXXXXXXX` under this process's scratch root.
    public static func folder(_ prefix: String) throws -> URL {
        let url = root.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// `$TMPDIR/atsproxy-tests-PID`, registered for removal at exit on first use.
    private static let root: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "atsproxy-tests-\(ProcessInfo.processInfo.processIdentifier)")
        atexit {
            do {
                try FileManager.default.removeItem(at: TestScratch.rootForExit)
            } catch {
                // At exit nothing can be done about it: the folder, named with the pid, stays in the temp directory.
            }
        }
        return url
    }()

    /// The root's URL for the exit handler, which can capture nothing.
    fileprivate static var rootForExit: URL { root }
}
