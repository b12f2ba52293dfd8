import Foundation
import GRDB

/// Opening a capture file: what is at the path, and whether it is a capture this build can read or extend. Every
/// check runs on a read-only connection before anything writes, so a file that fails one is left as it was.
enum CaptureFile {
    /// What a path holds before the store opens it.
    enum Found {
        /// Nothing: a new capture is created.
        case nothing
        /// An empty file (made by `touch`, or by a run that stopped before its first write): safe to fill.
        case emptyFile
        /// A file that starts with SQLite's header.
        case sqlite
    }

    private static let sqliteHeader = Array("SQLite format 3\u{0}".utf8)

    static func find(_ path: String) throws(CaptureFileError) -> Found {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return .nothing }
            throw CaptureFileError(path: path, problem: .cannotOpen(String(cString: strerror(errno))))
        }
        if (info.st_mode & S_IFMT) == S_IFDIR { throw CaptureFileError(path: path, problem: .isDirectory) }
        if info.st_size == 0 { return .emptyFile }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CaptureFileError(path: path, problem: .cannotOpen(String(cString: strerror(errno)))) }
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: sqliteHeader.count)
        let n = read(fd, &header, header.count)
        guard n == header.count, header == sqliteHeader else { throw CaptureFileError(path: path, problem: .notSQLite) }
        return .sqlite
    }

    /// A read-only connection to the SQLite file at `path`.
    static func openReadOnly(_ path: String) throws(CaptureFileError) -> DatabaseQueue {
        SQLiteSetup.ensure()
        var configuration = Configuration()
        configuration.readonly = true
        configuration.label = "atsproxy.capture.reader"
        do { return try DatabaseQueue(path: path, configuration: configuration) } catch {
            throw CaptureFileError.reading(path, error)
        }
    }

    /// Throws unless `db` is a capture whose every schema step this build knows. `thorough` also has SQLite read
    /// every page (`quick_check`), before a run appends to the file.
    static func check(_ db: Database, path: String, thorough: Bool) throws(CaptureFileError) {
        do {
            let applicationID = try Int32.fetchOne(db, sql: "PRAGMA application_id") ?? 0
            guard applicationID == CaptureSchema.applicationID else {
                throw CaptureFileError(path: path, problem: .notACapture)
            }
            let migrator = CaptureSchema.migrator
            let applied = try migrator.appliedIdentifiers(db)
            guard applied.isDisjoint(with: CaptureSchema.preReleaseSteps) else {
                throw CaptureFileError(path: path, problem: .preRelease)
            }
            let known = Set(migrator.migrations)
            let unknown = applied.subtracting(known).sorted()
            guard unknown.isEmpty else { throw CaptureFileError(path: path, problem: .newerVersion(unknownSteps: unknown)) }
            guard applied.contains(CaptureSchema.Step.tables) else {
                throw CaptureFileError(path: path, problem: .notACapture)
            }
            if thorough {
                let result = try String.fetchAll(db, sql: "PRAGMA quick_check")
                guard result == ["ok"] else {
                    throw CaptureFileError(path: path, problem: .corrupt(result.prefix(3).joined(separator: "; ")))
                }
            }
        } catch let error as CaptureFileError {
            throw error
        } catch {
            throw CaptureFileError.reading(path, error)
        }
    }
}
