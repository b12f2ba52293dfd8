/// A filter expression that does not parse: where (1-based column, in characters) and what was expected there.
public struct FilterSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    public let expression: String
    public let column: Int
    public let message: String

    public init(expression: String, column: Int, message: String) {
        self.expression = expression
        self.column = column
        self.message = message
    }

    /// `filter, column 1: unknown key "hots"; …`, then the expression with a caret under the column.
    public var description: String {
        "filter, column \(column): \(message)\n  \(expression)\n  " + String(repeating: " ", count: column - 1) + "^"
    }
}
