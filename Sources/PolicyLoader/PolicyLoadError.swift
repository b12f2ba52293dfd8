/// Why a policy could not be loaded. `description` names the file, the key path (if any) and the problem.
public struct PolicyLoadError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The problem, without the location.
    public enum Kind: Sendable, Equatable {
        case fileNotFound
        case notReadable(detail: String)
        /// `size` is nil when the file was refused while streaming (size unknown up front).
        case tooLarge(size: UInt64?, limit: Int)
        /// No bytes at all, or only whitespace.
        case emptyFile
        /// Neither an XML (`<…`) nor a binary (`bplist0…`) property list.
        case notAPropertyList
        /// Foundation rejected the plist; `line` when Foundation named one.
        case malformed(line: Int?, detail: String)
        /// The binary object table is inconsistent (found by the pre-scan before Foundation sees the data).
        case corruptBinary(detail: String)
        case nestingTooDeep(limit: Int, line: Int?)
        case tooManyValues(limit: Int)
        case cyclicReference
        case nonStringKey
        case rootNotDictionary(actualType: String)
        case atsNotDictionary(actualType: String)
        case notAZipArchive(detail: String)
        case ipaWithoutInfoPlist
        case bundleWithoutInfoPlist
        /// A folder that is not an `.app` bundle (no `.app` suffix and no Info.plist), e.g. `/tmp`.
        case notABundle
    }

    /// The file (or archive member) concerned, e.g. `MyApp.ipa › Payload/MyApp.app/Info.plist`.
    public let file: String
    /// Key path inside the plist, empty for file-level problems.
    public let keyPath: [String]
    /// What went wrong.
    public let kind: Kind

    /// An error about `file`, at `keyPath` inside it (empty for the file as a whole).
    public init(file: String, keyPath: [String] = [], kind: Kind) {
        self.file = file
        self.keyPath = keyPath
        self.kind = kind
    }

    /// `<file> › <key/path>: <problem>`, one line for the user.
    public var description: String {
        let location = keyPath.isEmpty ? file : "\(file) › \(keyPath.joined(separator: "/"))"
        return "\(location): \(problem)"
    }

    private var problem: String {
        switch kind {
        case .fileNotFound:
            return "file not found"
        case .notReadable(let detail):
            return "cannot read the file (\(detail))"
        case .tooLarge(let size, let limit):
            let what = size.map { "\($0) bytes is" } ?? "the content is"
            return "\(what) larger than the \(limit)-byte (\(limit / 1_048_576) MiB) limit for a property list; "
                + "refused without reading it all"
        case .emptyFile:
            return "the file is empty: there is no property list in it"
        case .notAPropertyList:
            return "not a property list: it starts with neither '<' (XML plist) nor 'bplist0' (binary plist)"
        case .malformed(let line, let detail):
            let at = line.map { " at line \($0)" } ?? ""
            return "malformed property list\(at): \(detail)"
        case .corruptBinary(let detail):
            return "corrupt binary property list: \(detail)"
        case .nestingTooDeep(let limit, let line):
            let at = line.map { " (line \($0))" } ?? ""
            return "arrays/dictionaries nested deeper than \(limit) levels\(at); refused before parsing"
        case .tooManyValues(let limit):
            return "the binary plist expands to more than \(limit) values (shared object references); refused"
        case .cyclicReference:
            return "corrupt binary property list: an array or dictionary contains itself (cyclic object reference)"
        case .nonStringKey:
            return "a dictionary key is not a string"
        case .rootNotDictionary(let type):
            return "the root is \(article(type)) \(type), not a Dictionary (expected an Info.plist or an "
                + "NSAppTransportSecurity dictionary)"
        case .atsNotDictionary(let type):
            return "is \(article(type)) \(type), not a Dictionary; ATS cannot read it "
                + "(make NSAppTransportSecurity a <dict>)"
        case .notAZipArchive(let detail):
            return "not a readable .ipa (zip) archive (\(detail))"
        case .ipaWithoutInfoPlist:
            return "no Payload/*.app/Info.plist entry in this .ipa"
        case .bundleWithoutInfoPlist:
            return "no Info.plist (nor Contents/Info.plist) in this .app bundle folder"
        case .notABundle:
            return "a folder, not an .app bundle (it has no Info.plist); give a plist file, an .app folder or an .ipa"
        }
    }

    /// "a" or "an" for a plist type name ("an Array", "a Dictionary").
    private func article(_ word: String) -> String {
        word.first.map { "AEIOUaeiou".contains($0) } == true ? "an" : "a"
    }
}
