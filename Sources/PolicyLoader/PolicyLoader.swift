import ATSPolicy
import Foundation

/// Loads an ATS policy from a plist file, an `.app` bundle folder or an `.ipa` archive.
///
/// What is accepted:
/// - a plist file, XML or binary, no larger than `maximumPlistBytes`;
/// - a folder (normally `X.app`): its `Info.plist` (or `Contents/Info.plist` for a macOS bundle);
/// - an `.ipa` (a zip): only the entry `Payload/<name>.app/Info.plist` is decompressed, with the same size cap.
///
/// Whole Info.plist or bare ATS dictionary — the rule, applied to the root dictionary in this order:
/// 1. it has an `NSAppTransportSecurity` key → a whole Info.plist; that value is the policy;
/// 2. it has an Info.plist key (any key starting with `CF`, `LS`, `UI`, `DT`, or `MinimumOSVersion`) → a whole
///    Info.plist without ATS settings: full ATS defaults apply (reported in `notes`);
/// 3. otherwise (ATS keys, unknown keys, or empty) → the file itself is the `NSAppTransportSecurity` dictionary.
/// `.app` and `.ipa` sources are always whole Info.plists.
///
/// Hostile input gets a `PolicyLoadError` in bounded time and memory: the size is checked before reading, and a
/// pre-scan (`PlistPreScan`) refuses deep nesting, cyclic or out-of-range binary references and reference
/// bombs before Foundation's recursive parser runs.
public enum PolicyLoader {
    /// Largest plist accepted (8 MiB). Real Info.plists are a few KiB; the cap keeps a mistaken path (a video, a
    /// disk image) from being read into memory.
    public static let maximumPlistBytes = 8 * 1_048_576

    /// Loads the policy at `path` (plist file, `.app` folder or `.ipa`).
    public static func load(path: String) throws(PolicyLoadError) -> LoadedPolicy {
        let display = path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw PolicyLoadError(file: display, kind: .fileNotFound)
        }
        if isDirectory.boolValue {
            return try loadBundle(folder: path)
        }
        // An .ipa is usually far larger than the plist cap, so it is recognised (by name or zip signature) before
        // the capped read; only its Info.plist member is then inflated, under the same cap.
        let zipSignature: [UInt8] = [0x50, 0x4B, 0x03, 0x04]
        var isArchive = path.lowercased().hasSuffix(".ipa")
        if !isArchive {
            let prefix = try PolicySource.readFile(path: path, display: display, limit: 4, prefixOnly: true)
            isArchive = prefix == zipSignature
        }
        if isArchive {
            return try loadIPA(path: path)
        }
        let bytes = try PolicySource.readFile(path: path, display: display, limit: maximumPlistBytes)
        return try decode(bytes, source: display, forceWholeInfoPlist: false)
    }

    /// Parses plist bytes already in memory. `source` names them in errors and in `sourceDescription`.
    /// `forceWholeInfoPlist` is set for `.app`/`.ipa` members, which can only be whole Info.plists.
    public static func decode(_ bytes: [UInt8], source: String, forceWholeInfoPlist: Bool = false)
        throws(PolicyLoadError) -> LoadedPolicy
    {
        let (root, format) = try parse(bytes, source: source)
        guard case .dictionary(let dict) = root else {
            throw PolicyLoadError(file: source, kind: .rootNotDictionary(actualType: root.typeName))
        }
        return try interpret(dict, format: format, source: source, forceWholeInfoPlist: forceWholeInfoPlist)
    }

    // MARK: - Sources

    private static func loadBundle(folder: String) throws(PolicyLoadError) -> LoadedPolicy {
        let folderName = URL(fileURLWithPath: folder).lastPathComponent
        for member in ["Info.plist", "Contents/Info.plist"] {
            let path = (folder as NSString).appendingPathComponent(member)
            guard FileManager.default.fileExists(atPath: path) else { continue }
            let display = "\(folderName) › \(member)"
            let bytes = try PolicySource.readFile(path: path, display: display, limit: maximumPlistBytes)
            return try decode(bytes, source: display, forceWholeInfoPlist: true)
        }
        // A folder that is neither named nor shaped like a bundle (a mistyped path such as /tmp) is said to be so.
        let isNamedLikeBundle = folderName.lowercased().hasSuffix(".app")
        throw PolicyLoadError(file: folder, kind: isNamedLikeBundle ? .bundleWithoutInfoPlist : .notABundle)
    }

    private static func loadIPA(path: String) throws(PolicyLoadError) -> LoadedPolicy {
        let member = try PolicySource.readIPAInfoPlist(path: path, limit: maximumPlistBytes)
        let display = "\(URL(fileURLWithPath: path).lastPathComponent) › \(member.entryPath)"
        return try decode(member.bytes, source: display, forceWholeInfoPlist: true)
    }

    // MARK: - Parsing

    private static func parse(_ bytes: [UInt8], source: String) throws(PolicyLoadError) -> (
        PlistValue, LoadedPolicy.Format
    ) {
        let format: LoadedPolicy.Format
        if bytes.allSatisfy(isWhitespace) {
            throw PolicyLoadError(file: source, kind: .emptyFile)
        }
        if bytes.starts(with: Array("bplist0".utf8)) {
            format = .binary
        } else if looksLikeXML(bytes) {
            format = .xml
        } else {
            // Also refuses OpenStep-style text plists, which Foundation would accept but an Info.plist never is.
            throw PolicyLoadError(file: source, kind: .notAPropertyList)
        }
        do {
            switch format {
            case .xml: try PlistPreScan.checkXMLDepth(bytes)
            case .binary: try PlistPreScan.checkBinary(bytes)
            }
        } catch {
            throw PolicyLoadError(file: source, kind: kind(of: error))
        }

        let any: Any
        do {
            any = try PropertyListSerialization.propertyList(from: Data(bytes), options: [], format: nil)
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
            throw PolicyLoadError(file: source, kind: .malformed(line: lineNumber(in: detail), detail: detail))
        }
        do {
            return (try PlistConversion.value(any), format)
        } catch {
            throw PolicyLoadError(file: source, keyPath: error.keyPath, kind: error.kind)
        }
    }

    private static func kind(of failure: PlistPreScan.Failure) -> PolicyLoadError.Kind {
        switch failure {
        case .tooDeep(let line): .nestingTooDeep(limit: PlistPreScan.maximumDepth, line: line)
        case .tooManyValues: .tooManyValues(limit: PlistPreScan.maximumValues)
        case .cyclic: .cyclicReference
        case .corrupt(let detail): .corruptBinary(detail: detail)
        }
    }

    /// Space, tab, LF or CR.
    private static func isWhitespace(_ byte: UInt8) -> Bool { [0x20, 0x09, 0x0A, 0x0D].contains(byte) }

    /// XML plists start with `<` after an optional UTF-8 byte-order mark and whitespace.
    private static func looksLikeXML(_ bytes: [UInt8]) -> Bool {
        var i = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while i < bytes.count, isWhitespace(bytes[i]) { i += 1 }
        return i < bytes.count && bytes[i] == UInt8(ascii: "<")
    }

    /// Foundation's XML parser says "… on line N" / "… at line N"; returns N.
    static func lineNumber(in detail: String) -> Int? {
        let words = detail.split(whereSeparator: { $0 == " " || $0 == ";" || $0 == "," })
        for (i, w) in words.enumerated().dropLast() where w == "line" {
            if let n = Int(words[i + 1]) { return n }
        }
        return nil
    }
}
