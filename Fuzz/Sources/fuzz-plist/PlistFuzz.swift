import ATSPolicy
import Foundation
import FuzzSupport
import PolicyLoader

// Input: a file the user names with --plist. A zip (an .ipa) is written to a scratch file and loaded by path, as
// the CLI does (the .ipa reader works on files); anything else is decoded as XML or binary plist bytes,
// both as a bare ATS dictionary and as an app's Info.plist. Every input must load or throw a PolicyLoadError.

/// A scratch folder of this process, removed at exit: in /dev/shm when there is one, since every archive input is
/// written to a file and a disk-backed /tmp made that write most of each run's time.
private let scratch: URL = {
    let memory = URL(fileURLWithPath: "/dev/shm")
    let base = FileManager.default.isWritableFile(atPath: memory.path) ? memory : FileManager.default.temporaryDirectory
    let url = base
        .appendingPathComponent("atsproxy-fuzz-plist-\(ProcessInfo.processInfo.processIdentifier)")
    do {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    } catch {
        fatalError("cannot create the scratch folder \(url.path): \(error)")
    }
    atexit {
        do {
            try FileManager.default.removeItem(at: scratch)
        } catch {
            // At exit nothing can be done about it; a leftover folder in the temp directory is harmless.
        }
    }
    return url
}()

private let zipSignature: [UInt8] = [0x50, 0x4B, 0x03, 0x04]

/// One input; see above.
func fuzzPlist(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: count))
    if bytes.starts(with: zipSignature) {
        let ipa = scratch.appendingPathComponent("App.ipa")
        do {
            try Data(bytes).write(to: ipa)
        } catch {
            fatalError("cannot write \(ipa.path): \(error)")
        }
        load { () throws(PolicyLoadError) in try PolicyLoader.load(path: ipa.path) }
    } else {
        load { () throws(PolicyLoadError) in try PolicyLoader.decode(bytes, source: "fuzz") }
        load { () throws(PolicyLoadError) in try PolicyLoader.decode(bytes, source: "fuzz", forceWholeInfoPlist: true) }
    }
    return 0
}

private func load(_ body: () throws(PolicyLoadError) -> LoadedPolicy) {
    do {
        // The CLI turns the loaded dictionary into a policy: that decoding sees the same hostile values.
        _ = ATSPolicy(atsDictionary: try body().atsDictionary)
    } catch {
        // A refused file: the expected outcome for most inputs; its message must be printable.
        _ = error.description
    }
}
