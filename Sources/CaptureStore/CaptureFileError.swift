import Foundation
import GRDB

/// Why a capture file cannot be used, naming the file and the problem. A file that is not a capture, is from a
/// newer atsproxy, or is corrupt is never written to: the store checks before it writes anything.
public struct CaptureFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Problem: Sendable, Equatable {
        /// No file at the path (reading).
        case missing
        /// An empty file (reading): nothing was ever written to it.
        case empty
        /// Another atsproxy is writing this capture (it holds the file's lock).
        case inUse
        /// A directory, not a file.
        case isDirectory
        /// The bytes are not a SQLite database at all (a HAR, a log, a truncated download).
        case notSQLite
        /// A SQLite database of some other program.
        case notACapture
        /// Written by a newer atsproxy: its schema has steps this build does not know.
        case newerVersion(unknownSteps: [String])
        /// Written by a development build from before the first release, whose schema steps were folded into the
        /// released first step (`CaptureSchema.preReleaseSteps`): this build does not read it.
        case preRelease
        /// SQLite found the file damaged.
        case corrupt(String)
        /// The file or its folder cannot be opened or created (permissions, a read-only file system).
        case cannotOpen(String)
        /// A write failed (disk full, file size limit, I/O error); what was committed before stays.
        case cannotWrite(String)
        /// A read failed for another reason SQLite gave.
        case cannotRead(String)
    }

    public let path: String
    public let problem: Problem

    public init(path: String, problem: Problem) {
        self.path = path
        self.problem = problem
    }

    public var description: String {
        switch problem {
        case .missing: return "\(path): no such file"
        case .empty: return "\(path): an empty file, not a capture (nothing was ever written to it)"
        case .inUse:
            return "\(path): another atsproxy is writing this capture; stop it first, or capture to another file"
        case .isDirectory: return "\(path): is a directory, not a capture file"
        case .notSQLite: return "\(path): not an ATSProxy capture (not a SQLite database); it was left as it is"
        case .notACapture:
            return "\(path): a SQLite database, but not an ATSProxy capture; it was left as it is"
        case .newerVersion(let steps):
            return "\(path): written by a newer atsproxy (capture schema steps \(steps.joined(separator: ", ")) are "
                + "unknown to this build); use that version or newer to open it; it was left as it is"
        case .preRelease:
            return "\(path): written by a pre-release build of atsproxy, whose capture format this version does not "
                + "read; open it with the build that wrote it; it was left as it is"
        case .corrupt(let detail): return "\(path): the capture is corrupt (\(detail)); it was left as it is"
        case .cannotOpen(let reason): return "\(path): cannot open the capture: \(reason)"
        case .cannotWrite(let reason): return "\(path): cannot write the capture: \(reason)"
        case .cannotRead(let reason): return "\(path): cannot read the capture: \(reason)"
        }
    }

    /// Classifies a SQLite error met while opening or reading `path`.
    static func reading(_ path: String, _ error: any Error) -> CaptureFileError {
        guard let error = error as? DatabaseError else {
            return CaptureFileError(path: path, problem: .cannotRead(String(describing: error)))
        }
        switch error.resultCode {
        case .SQLITE_NOTADB: return CaptureFileError(path: path, problem: .notSQLite)
        case .SQLITE_CORRUPT: return CaptureFileError(path: path, problem: .corrupt(error.sqliteText))
        case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_AUTH, .SQLITE_READONLY:
            return CaptureFileError(path: path, problem: .cannotOpen(error.sqliteText))
        default: return CaptureFileError(path: path, problem: .cannotRead(error.sqliteText))
        }
    }

    /// Classifies a SQLite error met while writing `path`.
    static func writing(_ path: String, _ error: any Error) -> CaptureFileError {
        guard let error = error as? DatabaseError else {
            return CaptureFileError(path: path, problem: .cannotWrite(String(describing: error)))
        }
        switch error.resultCode {
        case .SQLITE_CORRUPT, .SQLITE_NOTADB: return CaptureFileError(path: path, problem: .corrupt(error.sqliteText))
        default: return CaptureFileError(path: path, problem: .cannotWrite(error.sqliteText))
        }
    }
}

extension DatabaseError {
    /// SQLite's own words for the error (`database or disk is full`), without GRDB's SQL echo.
    var sqliteText: String {
        message ?? "SQLite error \(extendedResultCode.description)"
    }
}
