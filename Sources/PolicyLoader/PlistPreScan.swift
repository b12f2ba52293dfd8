/// Cheap checks run on the raw bytes *before* Foundation parses them.
///
/// Foundation's plist parsers recurse once per nesting level, so a hostile file with 100 000 nested arrays can
/// overflow the stack, and a binary plist whose objects share references ("billion laughs") or refer to
/// themselves can make a tree walk take unbounded time. These scans are iterative, bounds-checked, and linear in
/// the input size, so anything they let through is safe to hand to Foundation and to convert recursively.
enum PlistPreScan {
    /// Deepest array/dictionary nesting accepted. Real Info.plists nest fewer than 10 levels.
    static let maximumDepth = 512
    /// Most values a binary plist may expand to once shared references are unfolded into a tree.
    static let maximumValues = 1_000_000

    /// The failure of a scan, turned into a `PolicyLoadError` by the caller (which knows the file name).
    enum Failure: Error, Equatable {
        case tooDeep(line: Int?)
        case tooManyValues
        case cyclic
        case corrupt(String)
    }
}
