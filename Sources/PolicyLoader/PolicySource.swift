import Foundation

/// Bounded reads of plist bytes from a file or from an `.ipa` member.
enum PolicySource {
    /// Reads at most `limit` bytes; refuses larger files from their size before reading, and special files
    /// (pipes, devices) that turn out larger while reading. With `prefixOnly`, returns the first `limit` bytes of
    /// a file of any size instead.
    static func readFile(path: String, display: String, limit: Int, prefixOnly: Bool = false)
        throws(PolicyLoadError) -> [UInt8]
    {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw PolicyLoadError(file: display, kind: .notReadable(detail: reason(error)))
        }
        if !prefixOnly, let size = (attributes[.size] as? NSNumber)?.uint64Value, size > UInt64(limit) {
            throw PolicyLoadError(file: display, kind: .tooLarge(size: size, limit: limit))
        }
        let data: Data
        do {
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? handle.close() }  // read-only handle: a failed close loses nothing
            data = try handle.read(upToCount: prefixOnly ? limit : limit + 1) ?? Data()
        } catch {
            throw PolicyLoadError(file: display, kind: .notReadable(detail: reason(error)))
        }
        guard data.count <= limit else {
            throw PolicyLoadError(file: display, kind: .tooLarge(size: nil, limit: limit))
        }
        return [UInt8](data)
    }

    /// The `Payload/<name>.app/Info.plist` entry of an `.ipa`, decompressed with a size cap.
    static func readIPAInfoPlist(path: String, limit: Int) throws(PolicyLoadError) -> (
        entryPath: String, bytes: [UInt8]
    ) {
        let display = URL(fileURLWithPath: path).lastPathComponent
        let handle: FileHandle
        let fileSize: UInt64
        do {
            handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            fileSize = try handle.seekToEnd()
        } catch {
            throw PolicyLoadError(file: display, kind: .notAZipArchive(detail: reason(error)))
        }
        defer { closeReadOnly(handle) }
        let archive: ZipMemberReader
        do {
            archive = try ZipMemberReader(handle: handle, fileSize: fileSize)
        } catch {
            throw PolicyLoadError(file: display, kind: .notAZipArchive(detail: error.detail))
        }
        // Only the app's own Info.plist: exactly Payload/X.app/Info.plist, not those of nested frameworks or
        // extensions (Payload/X.app/PlugIns/…). If several apps are present, the first by name is taken.
        let candidates = archive.members.filter { member in
            let parts = member.path.split(separator: "/", omittingEmptySubsequences: false)
            return !member.isDirectory && parts.count == 3 && parts[0] == "Payload" && parts[1].hasSuffix(".app")
                && parts[1].count > 4 && parts[2] == "Info.plist"
        }.sorted { $0.path < $1.path }
        guard let entry = candidates.first else { throw PolicyLoadError(file: display, kind: .ipaWithoutInfoPlist) }
        let member = "\(display) › \(entry.path)"
        if entry.uncompressedSize > UInt64(limit) {
            throw PolicyLoadError(file: member, kind: .tooLarge(size: entry.uncompressedSize, limit: limit))
        }
        // The header's size may lie (zip bomb): the reader counts while inflating and stops past the cap.
        do {
            return (entry.path, try archive.bytes(of: entry, limit: limit))
        } catch let failure as ZipMemberReader.Failure {
            throw PolicyLoadError(file: member, kind: .notAZipArchive(detail: failure.detail))
        } catch is ZipMemberReader.TooLarge {
            throw PolicyLoadError(file: member, kind: .tooLarge(size: nil, limit: limit))
        } catch {
            throw PolicyLoadError(file: member, kind: .notAZipArchive(detail: reason(error)))
        }
    }

    /// Closes a handle opened for reading: a failed close loses nothing, so it is not an error worth reporting.
    private static func closeReadOnly(_ handle: FileHandle) {
        do {
            try handle.close()
        } catch {
            // Nothing was written through it.
        }
    }

    private static func reason(_ error: any Error) -> String {
        let ns = error as NSError
        if ns.domain == NSCocoaErrorDomain, ns.code == NSFileReadNoSuchFileError { return "no such file" }
        if ns.domain == NSCocoaErrorDomain, ns.code == NSFileReadNoPermissionError { return "permission denied" }
        return ns.localizedDescription
    }
}
