import Foundation
import TestSupport
import PolicyLoader

/// A fresh folder under the system temporary directory, removed by `remove()`.
struct TempDir {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("PolicyLoaderTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    @discardableResult
    func write(_ name: String, _ bytes: [UInt8]) throws -> String {
        let p = path(name)
        try FileManager.default.createDirectory(
            at: URL(fileURLWithPath: p).deletingLastPathComponent(), withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: p))
        return p
    }

    func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Plist fixtures: every test writes XML and derives the binary form from it, so both encodings are exercised.
enum Fixture {
    static func xml(_ body: String) -> [UInt8] { PlistFixture.xml(body) }

    /// The same plist re-encoded as `bplist00` by Foundation.
    static func binary(fromXML xml: [UInt8]) throws -> [UInt8] { try PlistFixture.binary(fromXML: xml) }

    /// Both encodings of one XML body, labelled.
    static func both(_ body: String) throws -> [(LoadedPolicy.Format, [UInt8])] {
        let x = xml(body)
        return [(.xml, x), (.binary, try binary(fromXML: x))]
    }

    /// A hand-built binary plist: `objects` are raw object encodings (1-byte refs, 1- or 2-byte offsets).
    static func rawBinary(objects: [[UInt8]], top: Int = 0) -> [UInt8] {
        var out = Array("bplist00".utf8)
        var offsets: [Int] = []
        for o in objects {
            offsets.append(out.count)
            out += o
        }
        let tableOffset = out.count
        let offsetSize = out.count > 0xFF ? (out.count > 0xFFFF ? 4 : 2) : 1
        for o in offsets {
            for k in stride(from: offsetSize - 1, through: 0, by: -1) {
                out.append(UInt8(truncatingIfNeeded: o >> (8 * k)))
            }
        }
        out += [0, 0, 0, 0, 0, 0, UInt8(offsetSize), 0]  // 6 unused, offsetIntSize, objectRefSize (patched below)
        func be64(_ v: Int) -> [UInt8] { (0..<8).reversed().map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
        out += be64(objects.count) + be64(top) + be64(tableOffset)
        out[out.count - 32 + 7] = objects.count > 0xFF ? (objects.count > 0xFFFF ? 4 : 2) : 1
        return out
    }

    /// Binary encoding of an object reference list of the right width for `objectCount` objects.
    static func refs(_ rs: [Int], objectCount: Int) -> [UInt8] {
        let w = objectCount > 0xFF ? (objectCount > 0xFFFF ? 4 : 2) : 1
        return rs.flatMap { r in (0..<w).reversed().map { UInt8(truncatingIfNeeded: r >> (8 * $0)) } }
    }

    /// Marker + length for a container of `type` (0xA array, 0xD dict) holding `count` entries.
    static func containerHeader(_ type: UInt8, count: Int) -> [UInt8] {
        if count < 15 { return [type << 4 | UInt8(count)] }
        return [type << 4 | 0x0F, 0x11, UInt8(count >> 8), UInt8(count & 0xFF)]
    }

    /// SplitMix64: deterministic incompressible bytes for archive fixtures.
    struct SplitMix {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// Runs python3 with `script` and `args`; used to build .ipa (zip) fixtures independently of the loader.
    static func python(_ script: String, _ args: [String]) throws {
        let run = try runCommand("python3", ["-c", script] + args)
        guard run.status == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSDebugDescriptionErrorKey: run.stderrText]) }
    }

    /// Writes a zip at `path` with the given member names and contents (stored deflated).
    static func zip(at path: String, members: [(String, [UInt8])], in dir: TempDir) throws {
        var args = [path]
        for (i, m) in members.enumerated() {
            let p = try dir.write("zipsrc-\(i)", m.1)
            args += [m.0, p]
        }
        try python(
            """
            import sys, zipfile
            with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:
                a = sys.argv[2:]
                for name, src in zip(a[0::2], a[1::2]):
                    z.write(src, name)
            """, args)
    }
}
