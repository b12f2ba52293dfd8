import Foundation
import ZIPFoundation

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
        let archive: Archive
        do {
            archive = try Archive(url: URL(fileURLWithPath: path), accessMode: .read)
        } catch {
            throw PolicyLoadError(file: display, kind: .notAZipArchive(detail: reason(error)))
        }
        // Only the app's own Info.plist: exactly Payload/X.app/Info.plist, not those of nested frameworks or
        // extensions (Payload/X.app/PlugIns/…). If several apps are present, the first by name is taken.
        let candidates = archive.filter { entry in
            let parts = entry.path.split(separator: "/", omittingEmptySubsequences: false)
            return entry.type == .file && parts.count == 3 && parts[0] == "Payload" && parts[1].hasSuffix(".app")
                && parts[1].count > 4 && parts[2] == "Info.plist"
        }.sorted { $0.path < $1.path }
        guard let entry = candidates.first else { throw PolicyLoadError(file: display, kind: .ipaWithoutInfoPlist) }
        let member = "\(display) › \(entry.path)"
        if entry.uncompressedSize > UInt64(limit) {
            throw PolicyLoadError(file: member, kind: .tooLarge(size: entry.uncompressedSize, limit: limit))
        }
        // The header's size may lie (zip bomb): count while inflating and stop past the cap.
        var bytes: [UInt8] = []
        var exceeded = false
        do {
            let checksum = try archive.extract(entry, skipCRC32: false) { chunk in
                guard bytes.count + chunk.count <= limit else {
                    exceeded = true
                    throw CocoaError(.fileReadTooLarge)
                }
                bytes.append(contentsOf: chunk)
            }
            guard checksum == entry.checksum else {
                throw PolicyLoadError(
                    file: member, kind: .notAZipArchive(detail: "CRC-32 mismatch: the entry is corrupt"))
            }
        } catch let error as PolicyLoadError {
            throw error
        } catch {
            if exceeded { throw PolicyLoadError(file: member, kind: .tooLarge(size: nil, limit: limit)) }
            throw PolicyLoadError(file: member, kind: .notAZipArchive(detail: reason(error)))
        }
        return (entry.path, bytes)
    }

    private static func reason(_ error: any Error) -> String {
        let ns = error as NSError
        if ns.domain == NSCocoaErrorDomain, ns.code == NSFileReadNoSuchFileError { return "no such file" }
        if ns.domain == NSCocoaErrorDomain, ns.code == NSFileReadNoPermissionError { return "permission denied" }
        return ns.localizedDescription
    }
}
