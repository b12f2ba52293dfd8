/// A property-list value exactly as the file typed it.
///
/// ATS reads keys with strict types: a `<string>YES</string>` where a boolean belongs is *not* YES, the default
/// applies instead (reference §1, src S1). Keeping the file's own type lets the policy fall back to the default and
/// lets lint name the mistake. Dictionaries keep their keys in file order so findings come out in a stable order.
public indirect enum PlistValue: Sendable, Equatable, Hashable {
    case bool(Bool)
    case integer(Int)
    case real(Double)
    case string(String)
    case date(Double)  // seconds since 2001-01-01, as Foundation stores it
    case data([UInt8])
    case array([PlistValue])
    case dictionary(PlistDictionary)

    /// The name of this value's type as a plist author writes it (`Boolean`, `String`, `Dictionary`, …).
    public var typeName: String {
        switch self {
        case .bool: "Boolean"
        case .integer: "Integer"
        case .real: "Real"
        case .string: "String"
        case .date: "Date"
        case .data: "Data"
        case .array: "Array"
        case .dictionary: "Dictionary"
        }
    }

    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }

    /// The value as Apple's ATS parser reads a Boolean key: `[value isEqual:@YES]` over any NSNumber (src S1), so
    /// `<integer>1</integer>` is YES and any other number NO. nil for strings and every other type (the key is
    /// ignored and its default applies).
    public var atsBoolValue: Bool? {
        switch self {
        case .bool(let b): b
        case .integer(let i): i == 1
        case .real(let r): r == 1
        default: nil
        }
    }
    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var arrayValue: [PlistValue]? { if case .array(let a) = self { a } else { nil } }
    public var dictionaryValue: PlistDictionary? { if case .dictionary(let d) = self { d } else { nil } }
}

/// An ordered string-keyed plist dictionary.
public struct PlistDictionary: Sendable, Equatable, Hashable, Sequence {
    public private(set) var entries: [(key: String, value: PlistValue)]

    public init(_ entries: [(key: String, value: PlistValue)] = []) { self.entries = entries }

    public subscript(key: String) -> PlistValue? {
        entries.first(where: { $0.key == key })?.value
    }

    public var keys: [String] { entries.map(\.key) }
    public var isEmpty: Bool { entries.isEmpty }
    public var count: Int { entries.count }

    public mutating func set(_ key: String, _ value: PlistValue) {
        if let i = entries.firstIndex(where: { $0.key == key }) { entries[i].value = value } else {
            entries.append((key, value))
        }
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: PlistValue)]> { entries.makeIterator() }

    public static func == (a: PlistDictionary, b: PlistDictionary) -> Bool {
        a.entries.count == b.entries.count
            && zip(a.entries, b.entries).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for e in entries {
            hasher.combine(e.key)
            hasher.combine(e.value)
        }
    }
}
