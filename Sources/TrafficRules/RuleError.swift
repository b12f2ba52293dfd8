/// A rule that does not parse: where (its source, the 1-based column in the rule's text) and what is wrong.
public struct RuleError: Error, Sendable, Equatable, CustomStringConvertible {
    public var source: RuleSource
    /// 1-based, in characters, in the line (a file) or in the option's value.
    public var column: Int
    public var message: String

    public init(source: RuleSource, column: Int, message: String) {
        self.source = source
        self.column = column
        self.message = message
    }

    /// `rules.txt:3:14: unknown fault kind "expird"; …` (a file), `--fault #2, column 5: …` (an option).
    public var description: String {
        switch source {
        case .file: "\(source):\(column): \(message)"
        case .option: "\(source), column \(column): \(message)"
        }
    }
}
