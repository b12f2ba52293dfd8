/// A compiled regular expression that can cross threads with the rule holding it.
///
/// `Regex<AnyRegexOutput>` is not `Sendable` (its output type could hold anything), but a compiled regex is an
/// immutable program: matching never mutates it, so sharing one between event loops is safe.
struct CompiledRegex: @unchecked Sendable {
    let regex: Regex<AnyRegexOutput>

    init(_ pattern: String) throws {
        regex = try Regex(pattern)
    }
}
