/// An ordered list of header fields, exactly as they appeared on the wire.
///
/// Order, the spelling (case) of names and duplicate fields are all preserved, because a proxy must relay them
/// faithfully. Lookups by name are ASCII case-insensitive, as RFC 9110 §5.1 requires.
public struct HTTPHeaders: Equatable, Sendable, Sequence, ExpressibleByArrayLiteral {
    /// One header field: a name and its value without surrounding whitespace.
    public struct Field: Equatable, Sendable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The fields in wire order.
    public var fields: [Field]

    public init(_ fields: [(String, String)] = []) {
        self.fields = fields.map { Field(name: $0.0, value: $0.1) }
    }

    public init(arrayLiteral elements: (String, String)...) {
        self.init(elements)
    }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    /// Appends a field at the end (after any field with the same name).
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Removes every field with this name (case-insensitive).
    public mutating func remove(name: String) {
        fields.removeAll { $0.name.asciiCaseInsensitiveEquals(name) }
    }

    /// Replaces every field with this name by one field with the given value, appended at the end.
    public mutating func replaceOrAdd(name: String, value: String) {
        remove(name: name)
        add(name: name, value: value)
    }

    /// All values of fields with this name, in order (case-insensitive name match).
    public func values(for name: String) -> [String] {
        fields.lazy.filter { $0.name.asciiCaseInsensitiveEquals(name) }.map(\.value)
    }

    /// The first value of a field with this name, if any.
    public subscript(first name: String) -> String? {
        fields.first { $0.name.asciiCaseInsensitiveEquals(name) }?.value
    }

    /// Whether a field with this name exists.
    public func contains(name: String) -> Bool {
        fields.contains { $0.name.asciiCaseInsensitiveEquals(name) }
    }

    /// How many fields have this name: `values(for:).count` without building the list.
    public func count(of name: String) -> Int {
        var n = 0
        for field in fields where field.name.asciiCaseInsensitiveEquals(name) { n += 1 }
        return n
    }

    /// Whether a comma-separated list element of a field named `name` is `token` (ASCII case-insensitive, OWS
    /// trimmed): `listTokens(for:).contains(token)` without building the list, for the per-message checks
    /// (`Connection: close`, `Expect: 100-continue`) on a proxy's hot path.
    public func containsToken(_ token: String, for name: String) -> Bool {
        let wanted = Array(token.utf8)
        for field in fields where field.name.asciiCaseInsensitiveEquals(name) {
            for element in field.value.utf8.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true) {
                var lo = element.startIndex
                var hi = element.endIndex
                while lo < hi, element[lo] == 0x20 || element[lo] == 0x09 { lo = element.index(after: lo) }
                while hi > lo, element[element.index(before: hi)] == 0x20 || element[element.index(before: hi)] == 0x09 {
                    hi = element.index(before: hi)
                }
                let trimmed = element[lo..<hi]
                guard trimmed.count == wanted.count else { continue }
                if zip(trimmed, wanted).allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0) == $1 }) { return true }
            }
        }
        return false
    }

    /// The comma-separated list elements of every field with this name, trimmed and lower-cased, empty elements
    /// dropped (RFC 9110 §5.6.1 list syntax). Used for `Connection`, `Transfer-Encoding`, `Content-Length`.
    public func listTokens(for name: String) -> [String] {
        var result: [String] = []
        for value in values(for: name) {
            for element in value.split(separator: ",", omittingEmptySubsequences: true) {
                let trimmed = element.trimmingOWS()
                if !trimmed.isEmpty { result.append(trimmed.asciiLowercased()) }
            }
        }
        return result
    }
}

/// Two equal-length byte runs, compared ASCII case-insensitively.
@inline(__always)
func asciiCaseInsensitiveEqualBytes(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
    for i in 0..<x.count where !asciiCaseInsensitiveEqualByte(x[i], y[i]) { return false }
    return true
}

@inline(__always)
func asciiCaseInsensitiveEqualByte(_ x: UInt8, _ y: UInt8) -> Bool {
    x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= UInt8(ascii: "a") && (x | 0x20) <= UInt8(ascii: "z"))
}

extension StringProtocol {
    /// ASCII-only case-insensitive comparison; header names are ASCII tokens.
    func asciiCaseInsensitiveEquals(_ other: some StringProtocol) -> Bool {
        let a = self.utf8, b = other.utf8
        guard a.count == b.count else { return false }
        // Several lookups per message run over every field: compare contiguous UTF-8 (native and small strings
        // both have it) rather than through generic iterators.
        let fast = a.withContiguousStorageIfAvailable { x in
            b.withContiguousStorageIfAvailable { y in asciiCaseInsensitiveEqualBytes(x, y) }
        }
        if let fast, let result = fast { return result }
        for (x, y) in zip(a, b) where !asciiCaseInsensitiveEqualByte(x, y) { return false }
        return true
    }

    func asciiLowercased() -> String {
        String(decoding: utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }, as: UTF8.self)
    }

    /// Strips optional whitespace (SP / HTAB) from both ends.
    func trimmingOWS() -> String {
        let bytes = Array(utf8)
        var lo = 0, hi = bytes.count
        while lo < hi, bytes[lo] == 0x20 || bytes[lo] == 0x09 { lo += 1 }
        while hi > lo, bytes[hi - 1] == 0x20 || bytes[hi - 1] == 0x09 { hi -= 1 }
        return String(decoding: bytes[lo..<hi], as: UTF8.self)
    }
}
