#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What map local and file answers need from a file system: real paths (symlinks resolved, for the containment
/// check), a file's kind, size and modification time, and a range of its bytes. Injectable so tests can count reads
/// or fail them; `POSIXFileReader` is the real one.
public protocol FileReading: Sendable {
    /// The absolute path with every symlink, `.` and `..` resolved, or nil when it does not exist.
    func realPath(_ path: String) -> String?
    /// The kind, size and modification time of the file at a path (following symlinks), or nil when it does not
    /// exist.
    func info(_ path: String) -> FileInfo?
    /// `count` bytes of the file from `offset` (fewer only at its end), or nil when it cannot be read.
    func read(_ path: String, offset: Int, count: Int) -> [UInt8]?
}

/// A file's metadata, as map local needs it.
public struct FileInfo: Equatable, Sendable {
    public var isDirectory: Bool
    public var isRegularFile: Bool
    public var size: Int
    /// Seconds since 1970, for the ETag.
    public var modified: Int

    public init(isDirectory: Bool, isRegularFile: Bool, size: Int, modified: Int) {
        self.isDirectory = isDirectory
        self.isRegularFile = isRegularFile
        self.size = size
        self.modified = modified
    }
}

/// `FileReading` over the POSIX calls (realpath, stat, open and pread): blocking, small reads of local files.
public struct POSIXFileReader: FileReading {
    public init() {}

    public func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    public func info(_ path: String) -> FileInfo? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        let type = status.st_mode & S_IFMT
        #if canImport(Darwin)
        let modified = Int(status.st_mtimespec.tv_sec)
        #else
        let modified = Int(status.st_mtim.tv_sec)
        #endif
        return FileInfo(
            isDirectory: type == S_IFDIR, isRegularFile: type == S_IFREG, size: Int(status.st_size), modified: modified)
    }

    public func read(_ path: String, offset: Int, count: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: count)
        var filled = 0
        let ok = bytes.withUnsafeMutableBytes { buffer -> Bool in
            while filled < count {
                let n = pread(fd, buffer.baseAddress! + filled, count - filled, off_t(offset + filled))
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                if n == 0 { break }
                filled += n
            }
            return true
        }
        guard ok else { return nil }
        bytes.removeSubrange(filled...)
        return bytes
    }
}
