/// One header field as it travels on an HTTP/2 or HTTP/1 message, in wire order.
///
/// Names are UTF-8 (HTTP/2 names are lowercase tokens). Values are bytes held as a String by HTTP1Core's
/// `FieldBytes` mapping: valid UTF-8 as is, any other value with its high bytes escaped, so it is relayed byte for
/// byte on every protocol path.
public struct H2Header: Sendable, Hashable, CustomStringConvertible {
    /// Field name. HTTP/2 requires lowercase names; pseudo-header names start with `:`.
    public var name: String
    /// Field value.
    public var value: String

    /// Creates a header field.
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    /// `true` for HTTP/2 pseudo-header fields such as `:method`.
    public var isPseudo: Bool { name.hasPrefix(":") }

    /// `name: value`, as in a log line.
    public var description: String { "\(name): \(value)" }
}

extension Array where Element == H2Header {
    /// The value of the first field called `name` (compared case-insensitively), or `nil`.
    public func first(named name: String) -> String? {
        let wanted = name.lowercased()
        return first { $0.name.lowercased() == wanted }?.value
    }
}
