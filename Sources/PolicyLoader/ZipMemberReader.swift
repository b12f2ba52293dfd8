import Foundation
import Inflate

/// Finds one member of a ZIP archive (an `.ipa`) and reads its stored bytes, every read bounded by the file.
///
/// Why not `Archive.extract` from ZIPFoundation: on Linux its inflate loop asks for more input until the deflate
/// stream ends, and past the end of the file it gets empty chunks forever, so a member whose stream is cut short
/// hangs the process (found by fuzzing; `Tests/PolicyLoaderTests/Fixtures/ipa-deflate-stream-never-ends.ipa`).
/// Its inflate also tells zlib the chunk is a whole buffer when the last one is shorter, so zlib reads past the
/// end of it on a corrupt stream. This reader locates the member through the central directory (ZIP64 included),
/// hands zlib exactly the member's compressed bytes, and fails when the stream wants more than that: about 200
/// lines for the one member `--plist App.ipa` needs, instead of a dependency that hangs on hostile input.
struct ZipMemberReader {
    /// A member as the central directory describes it.
    struct Member: Equatable {
        var path: String
        var isDirectory: Bool
        /// 0 stored, 8 deflated; any other method is refused when read.
        var method: UInt16
        var crc32: UInt32
        var compressedSize: UInt64
        var uncompressedSize: UInt64
        var localHeaderOffset: UInt64
    }

    /// Why the archive cannot be read; the message is shown after the file's name.
    struct Failure: Error, Equatable {
        var detail: String
    }

    private let handle: FileHandle
    private let fileSize: UInt64
    /// Every member, in central-directory order.
    let members: [Member]

    /// The central directory may hold at most this many bytes (an `.ipa` of 100,000 files has about 10 MB).
    static let maximumDirectoryBytes: UInt64 = 256 << 20

    init(handle: FileHandle, fileSize: UInt64) throws(Failure) {
        self.handle = handle
        self.fileSize = fileSize
        members = try Self.readDirectory(handle: handle, fileSize: fileSize)
    }

    /// The member's uncompressed bytes, at most `limit` of them, with its CRC-32 checked.
    /// - Throws: `Failure` for a corrupt member; `TooLarge` past `limit`.
    func bytes(of member: Member, limit: Int) throws -> [UInt8] {
        let header = try read(at: member.localHeaderOffset, count: 30)
        guard Self.uint32(header, 0) == 0x0403_4b50 else { throw Failure(detail: "the member's local header is missing") }
        let dataOffset = member.localHeaderOffset + 30 + UInt64(Self.uint16(header, 26)) + UInt64(Self.uint16(header, 28))
        guard dataOffset <= fileSize, member.compressedSize <= fileSize - dataOffset else {
            throw Failure(detail: "the member's data runs past the end of the file")
        }
        // Deflate expands incompressible data by a few bytes per 16 KiB block; more than that cannot fit the limit.
        guard member.compressedSize <= UInt64(limit) + UInt64(limit / 1024) + 1024 else { throw TooLarge() }
        let stored = try read(at: dataOffset, count: Int(member.compressedSize))
        var output: [UInt8] = []
        switch member.method {
        case 0:
            guard stored.count <= limit else { throw TooLarge() }
            output = stored
        case 8:
            output = try Self.inflate(stored, limit: limit)
        default:
            throw Failure(detail: "compression method \(member.method) is not supported (only stored and deflated)")
        }
        guard UInt64(output.count) == member.uncompressedSize else {
            throw Failure(detail: "the member holds \(output.count) bytes, not the \(member.uncompressedSize) its entry says")
        }
        guard Self.crc32(output) == member.crc32 else { throw Failure(detail: "CRC-32 mismatch: the entry is corrupt") }
        return output
    }

    /// Thrown when a member holds more than the caller's limit.
    struct TooLarge: Error {}

    /// Raw deflate (ZIP method 8) through `Inflate`, fed exactly the member's bytes.
    private static func inflate(_ compressed: [UInt8], limit: Int) throws -> [UInt8] {
        do {
            return try Inflate.inflate(compressed, format: .raw, limit: limit)
        } catch .truncated {
            throw Failure(detail: "the deflated data ends before its stream does")
        } catch .corrupt {
            throw Failure(detail: "the deflated data is corrupt")
        } catch .tooLarge {
            throw TooLarge()
        }
    }

    // MARK: - Central directory

    private static func readDirectory(handle: FileHandle, fileSize: UInt64) throws(Failure) -> [Member] {
        // The end-of-central-directory record: 22 bytes plus a comment of up to 65,535, at the end of the file.
        let tailLength = Int(min(fileSize, 22 + 65_535))
        let tail = try read(handle, at: fileSize - UInt64(tailLength), count: tailLength, fileSize: fileSize)
        guard tail.count >= 22,
            let end = stride(from: tail.count - 22, through: 0, by: -1).first(where: { uint32(tail, $0) == 0x0605_4b50 })
        else { throw Failure(detail: "no end of central directory record: not a ZIP archive") }
        var count = UInt64(uint16(tail, end + 10))
        var size = UInt64(uint32(tail, end + 12))
        var offset = UInt64(uint32(tail, end + 16))
        if count == 0xFFFF || size == 0xFFFF_FFFF || offset == 0xFFFF_FFFF {
            // ZIP64: a locator right before the record points at the ZIP64 end record.
            let locatorStart = fileSize - UInt64(tailLength) + UInt64(end)
            guard locatorStart >= 20 else { throw Failure(detail: "ZIP64 locator missing") }
            let locator = try read(handle, at: locatorStart - 20, count: 20, fileSize: fileSize)
            guard uint32(locator, 0) == 0x0706_4b50 else { throw Failure(detail: "ZIP64 locator missing") }
            let record = try read(handle, at: uint64(locator, 8), count: 56, fileSize: fileSize)
            guard uint32(record, 0) == 0x0606_4b50 else { throw Failure(detail: "ZIP64 end record missing") }
            count = uint64(record, 32)
            size = uint64(record, 40)
            offset = uint64(record, 48)
        }
        guard size <= maximumDirectoryBytes else { throw Failure(detail: "central directory of \(size) bytes is too large") }
        guard offset <= fileSize, size <= fileSize - offset else {
            throw Failure(detail: "the central directory runs past the end of the file")
        }
        let directory = try read(handle, at: offset, count: Int(size), fileSize: fileSize)
        var members: [Member] = []
        var at = 0
        while UInt64(members.count) < count {
            guard at + 46 <= directory.count, uint32(directory, at) == 0x0201_4b50 else {
                throw Failure(detail: "central directory entry \(members.count + 1) is malformed")
            }
            let nameLength = Int(uint16(directory, at + 28))
            let extraLength = Int(uint16(directory, at + 30))
            let commentLength = Int(uint16(directory, at + 32))
            let next = at + 46 + nameLength + extraLength + commentLength
            guard next <= directory.count else { throw Failure(detail: "central directory entry \(members.count + 1) is cut short") }
            let name = String(decoding: directory[(at + 46)..<(at + 46 + nameLength)], as: UTF8.self)
            var member = Member(
                path: name, isDirectory: name.hasSuffix("/"), method: uint16(directory, at + 10),
                crc32: uint32(directory, at + 16), compressedSize: UInt64(uint32(directory, at + 20)),
                uncompressedSize: UInt64(uint32(directory, at + 24)),
                localHeaderOffset: UInt64(uint32(directory, at + 42)))
            try applyZIP64(Array(directory[(at + 46 + nameLength)..<(at + 46 + nameLength + extraLength)]), to: &member)
            members.append(member)
            at = next
        }
        return members
    }

    /// The ZIP64 extra field (id 1) holds, in this order, each of the three values whose 32-bit field is all ones.
    private static func applyZIP64(_ extra: [UInt8], to member: inout Member) throws(Failure) {
        var at = 0
        while at + 4 <= extra.count {
            let id = uint16(extra, at)
            let length = Int(uint16(extra, at + 2))
            guard at + 4 + length <= extra.count else { return }
            if id == 1 {
                var field = at + 4
                func next() throws(Failure) -> UInt64 {
                    guard field + 8 <= at + 4 + length else { throw Failure(detail: "ZIP64 extra field is cut short") }
                    defer { field += 8 }
                    return uint64(extra, field)
                }
                if member.uncompressedSize == 0xFFFF_FFFF { member.uncompressedSize = try next() }
                if member.compressedSize == 0xFFFF_FFFF { member.compressedSize = try next() }
                if member.localHeaderOffset == 0xFFFF_FFFF { member.localHeaderOffset = try next() }
                return
            }
            at += 4 + length
        }
    }

    // MARK: - Bytes

    private func read(at offset: UInt64, count: Int) throws(Failure) -> [UInt8] {
        try Self.read(handle, at: offset, count: count, fileSize: fileSize)
    }

    private static func read(_ handle: FileHandle, at offset: UInt64, count: Int, fileSize: UInt64) throws(Failure) -> [UInt8] {
        guard offset <= fileSize, UInt64(count) <= fileSize - offset else {
            throw Failure(detail: "a record runs past the end of the file")
        }
        do {
            try handle.seek(toOffset: offset)
            let data = try handle.read(upToCount: count) ?? Data()
            guard data.count == count else { throw Failure(detail: "the file ended early") }
            return [UInt8](data)
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(detail: "read failed: \(error.localizedDescription)")
        }
    }

    private static func uint16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
        UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
    }

    private static func uint32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(uint16(bytes, at)) | UInt32(uint16(bytes, at + 2)) << 16
    }

    private static func uint64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        UInt64(uint32(bytes, at)) | UInt64(uint32(bytes, at + 4)) << 32
    }

    /// CRC-32 (IEEE, reflected), as ZIP stores it.
    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc = crcTable[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
        }
        return crc ^ 0xFFFF_FFFF
    }

    private static let crcTable: [UInt32] = (0..<256).map { index in
        var c = UInt32(index)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }
}
