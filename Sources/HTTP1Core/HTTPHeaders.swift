/// An ordered list of header fields, exactly as they appeared on the wire.
///
/// Order, the spelling (case) of names and duplicate fields are all preserved, because a proxy must relay them
/// faithfully. Lookups by name are ASCII case-insensitive, as RFC 9110 §5.1 requires.
///
/// Fields the parser produced stay as wire bytes (one array for the whole section plus the positions of each name and
/// value) until someone asks for `fields`: a proxy that only looks up a few names per message (framing, keep-alive)
/// and relays the head as received never builds a String per field. Lookups work on either form.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByArrayLiteral {
    /// One header field: a name and its value without surrounding whitespace.
    public struct Field: Equatable, Sendable {
        public var name: String
        public var value: String

        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Where one field's name and value lie in `WireFields.bytes`.
    struct WireRange: Equatable, Sendable {
        var name: Range<Int>
        var value: Range<Int>
    }

    /// A field section as received: its bytes, the range of every field in order, and `nameFilter`, one bit per name
    /// present (``nameFilterBit(count:first:last:)``). Most lookups on a proxy's hot path are for names a message
    /// does not have (`Transfer-Encoding`, `Upgrade`, `Expect`…); the filter answers those without a scan.
    struct WireFields: Equatable, Sendable {
        var bytes: [UInt8]
        var ranges: [WireRange]
        var nameFilter: UInt64
    }

    /// The `nameFilter` bit of a name with this length and first and last bytes. `| 0x20` folds ASCII letters to
    /// lower case, so names that match case-insensitively share a bit; other collisions only cost a scan.
    @inline(__always)
    static func nameFilterBit(count: Int, first: UInt8, last: UInt8) -> UInt64 {
        1 &<< UInt64(truncatingIfNeeded: (count &* 7 &+ Int(first | 0x20) &* 3 &+ Int(last | 0x20)) & 63)
    }

    private enum Storage: Sendable {
        case wire(WireFields)
        case fields([Field])
    }

    private var storage: Storage

    /// The fields in wire order. Reading it from parsed headers decodes every name and value (use the lookups on the
    /// hot path); setting it replaces the list.
    public var fields: [Field] {
        get {
            switch storage {
            case .fields(let fields):
                return fields
            case .wire(let wire):
                return wire.ranges.map { r in
                    Field(name: HTTP1Syntax.string(wire.bytes[r.name]), value: HTTP1Syntax.string(wire.bytes[r.value]))
                }
            }
        }
        set { storage = .fields(newValue) }
        _modify {
            var list = fields
            storage = .fields([])
            defer { storage = .fields(list) }
            yield &list
        }
    }

    public init(_ fields: [(String, String)] = []) {
        storage = .fields(fields.map { Field(name: $0.0, value: $0.1) })
    }

    public init(arrayLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// Parsed fields, kept as wire bytes (names and values already validated by the parser).
    init(wire: WireFields) {
        storage = .wire(wire)
    }

    public var count: Int {
        switch storage {
        case .fields(let fields): fields.count
        case .wire(let wire): wire.ranges.count
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// Appends every field as `\r\nName: value` in wire order (the line form a capture stores), always valid UTF-8:
    /// a value that is not UTF-8 appears in `FieldBytes`' escaped form, as `fields` holds it, so a reader gets the
    /// same String back. Parsed fields are copied from their wire bytes: no String is made per ordinary field.
    public func appendLines(to out: inout [UInt8]) {
        switch storage {
        case .fields(let fields):
            for field in fields {
                out.append(13)
                out.append(10)
                out.append(contentsOf: field.name.utf8)
                out.append(UInt8(ascii: ":"))
                out.append(UInt8(ascii: " "))
                out.append(contentsOf: field.value.utf8)
            }
        case .wire(let wire):
            wire.bytes.withUnsafeBufferPointer { bytes in
                // Most heads arrive in exactly this form: then the lines are one run of the wire bytes, one copy.
                if let block = Self.lineFormBlock(wire.ranges, in: bytes) {
                    out.append(13)
                    out.append(10)
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[block]))
                    return
                }
                for r in wire.ranges {
                    out.append(13)
                    out.append(10)
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[r.name]))
                    out.append(UInt8(ascii: ":"))
                    out.append(UInt8(ascii: " "))
                    let value = UnsafeBufferPointer(rebasing: bytes[r.value])
                    if value.contains(where: { $0 >= 0x80 }) {
                        out.append(contentsOf: FieldBytes.string(value).utf8)
                    } else {
                        out.append(contentsOf: value)
                    }
                }
            }
        }
    }

    /// The wire bytes from the first field's name to the end of the last value, when they are already the
    /// line form `appendLines` writes: each field `Name: value` (one space, no trailing whitespace), CRLF between
    /// fields, no obs-fold, and only ASCII (other bytes are written escaped); nil otherwise.
    private static func lineFormBlock(_ ranges: [WireRange], in bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        guard let first = ranges.first, let last = ranges.last else { return nil }
        for i in ranges.indices {
            let r = ranges[i]
            guard r.value.lowerBound == r.name.upperBound + 2, bytes[r.name.upperBound] == UInt8(ascii: ":"),
                bytes[r.name.upperBound + 1] == UInt8(ascii: " ")
            else { return nil }
            if i + 1 < ranges.count {
                guard ranges[i + 1].name.lowerBound == r.value.upperBound + 2, bytes[r.value.upperBound] == 13,
                    bytes[r.value.upperBound + 1] == 10
                else { return nil }
            }
        }
        let block = first.name.lowerBound..<last.value.upperBound
        // ASCII only, checked eight bytes at a time.
        let raw = UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes[block]))
        var i = 0
        while i + 8 <= raw.count {
            if raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 { return nil }
            i += 8
        }
        while i < raw.count {
            if raw[i] >= 0x80 { return nil }
            i += 1
        }
        return block
    }

    public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

    /// Appends a field at the end (after any field with the same name).
    public mutating func add(name: String, value: String) {
        fields.append(Field(name: name, value: value))
    }

    /// Removes every field with this name (case-insensitive).
    public mutating func remove(name: String) {
        let wanted = Name(name)
        guard contains(wanted) else { return }
        fields.removeAll { wanted.matches($0.name) }
    }

    /// Replaces every field with this name by one field with the given value, appended at the end.
    public mutating func replaceOrAdd(name: String, value: String) {
        remove(name: name)
        add(name: name, value: value)
    }

    /// All values of fields with this name, in order (case-insensitive name match).
    public func values(for name: String) -> [String] {
        var result: [String] = []
        forEachValue(of: name) { value in result.append(HTTP1Syntax.string(value)) }
        return result
    }

    /// The first value of a field with this name, if any.
    public subscript(first name: String) -> String? {
        switch storage {
        case .fields(let fields):
            let wanted = Name(name)
            return fields.first { wanted.matches($0.name) }?.value
        case .wire:
            var value: String?
            forEachValue(of: name) { bytes in
                if value == nil { value = HTTP1Syntax.string(bytes) }
            }
            return value
        }
    }

    /// Whether a field with this name exists.
    public func contains(name: String) -> Bool {
        contains(Name(name))
    }

    /// How many fields have this name: `values(for:).count` without building the list.
    public func count(of name: String) -> Int {
        count(of: Name(name))
    }

    /// Whether a comma-separated list element of a field named `name` is `token` (ASCII case-insensitive, OWS
    /// trimmed): `listTokens(for:).contains(token)` without building the list, for the per-message checks
    /// (`Connection: close`, `Expect: 100-continue`) on a proxy's hot path.
    public func containsToken(_ token: String, for name: String) -> Bool {
        containsToken(Name(token), for: Name(name))
    }

    /// The comma-separated list elements of every field with this name, trimmed and lower-cased, empty elements
    /// dropped (RFC 9110 §5.6.1 list syntax). Used for `Connection`, `Transfer-Encoding`, `Content-Length`.
    public func listTokens(for name: String) -> [String] {
        listTokens(for: Name(name))
    }

    /// Whether a relay has something to remove before passing this head on (RFC 9110 §7.6.1): a `Connection` option
    /// other than `close`, `keep-alive` and `upgrade` (it names a field meant for this hop only), `keep-alive` with a
    /// `Keep-Alive` field, or, with `h2cUpgrade`, an `Upgrade` that lists `h2c`. Scans without allocating, since a
    /// relay asks it of every head it forwards.
    public func hasHopByHopFields(h2cUpgrade: Bool) -> Bool {
        var foreign = false
        var keepAlive = false
        forEachValue(of: .connection) { value in
            Self.forEachListElement(value) { option in
                if Name.keepAlive.matches(option) {
                    keepAlive = true
                } else if !Name.close.matches(option), !Name.upgrade.matches(option) {
                    foreign = true
                }
            }
        }
        if foreign || (keepAlive && contains(.keepAlive)) { return true }
        return h2cUpgrade && containsToken(.h2c, for: .upgrade)
    }

    func contains(_ name: Name) -> Bool {
        count(of: name) > 0
    }

    func count(of name: Name) -> Int {
        var n = 0
        forEachValue(of: name) { _ in n += 1 }
        return n
    }

    func containsToken(_ token: Name, for name: Name) -> Bool {
        var found = false
        forEachValue(of: name) { value in
            if found { return }
            Self.forEachListElement(value) { element in
                if !found, token.matches(element) { found = true }
            }
        }
        return found
    }

    func listTokens(for name: Name) -> [String] {
        var result: [String] = []
        forEachValue(of: name) { value in
            Self.forEachListElement(value) { element in
                result.append(HTTP1Syntax.string(element).asciiLowercased())
            }
        }
        return result
    }

    func forEachValue<E: Error>(of name: String, _ body: (ArraySlice<UInt8>) throws(E) -> Void) throws(E) {
        try forEachValue(of: Name(name), body)
    }

    /// Calls `body` with the bytes of each value of a field named `name`, in order.
    func forEachValue<E: Error>(of name: Name, _ body: (ArraySlice<UInt8>) throws(E) -> Void) throws(E) {
        switch storage {
        case .fields(let fields):
            for field in fields where name.matches(field.name) {
                try body(FieldBytes.bytes(field.value)[...])
            }
        case .wire(let wire):
            guard wire.nameFilter & name.filterBit != 0 else { return }
            let count = name.lowercased.count
            for r in wire.ranges where r.name.count == count && name.matches(wire.bytes[r.name]) {
                try body(wire.bytes[r.value])
            }
        }
    }

    /// Calls `body` with each non-empty element of a comma-separated list, OWS trimmed.
    static func forEachListElement<E: Error>(_ value: ArraySlice<UInt8>, _ body: (ArraySlice<UInt8>) throws(E) -> Void)
        throws(E)
    {
        var i = value.startIndex
        while i < value.endIndex {
            var end = i
            while end < value.endIndex, value[end] != UInt8(ascii: ",") { end += 1 }
            var lo = i
            var hi = end
            while lo < hi, value[lo] == 0x20 || value[lo] == 0x09 { lo += 1 }
            while hi > lo, value[hi - 1] == 0x20 || value[hi - 1] == 0x09 { hi -= 1 }
            if lo < hi { try body(value[lo..<hi]) }
            i = end + 1
        }
    }
}

extension HTTPHeaders {
    /// A field name (or list token) prepared for lookups: its lower-cased bytes and its
    /// ``nameFilterBit(count:first:last:)``.
    /// The names looked up on every message are made once, as static constants; comparing against bytes is then a
    /// plain loop, where a `String.UTF8View` walks index by index.
    struct Name: Sendable {
        let lowercased: [UInt8]
        let filterBit: UInt64

        init(_ name: String) {
            // A plain loop over the UTF-8 bytes: `utf8.map` went through the generic sequence path (about 800
            // instructions for `Proxy-Authorization`, looked up on every request).
            var name = name
            lowercased = name.withUTF8 { utf8 in
                [UInt8](unsafeUninitializedCapacity: utf8.count) { out, count in
                    for i in 0..<utf8.count { out[i] = asciiLowercase(utf8[i]) }
                    count = utf8.count
                }
            }
            if let first = lowercased.first, let last = lowercased.last {
                filterBit = nameFilterBit(count: lowercased.count, first: first, last: last)
            } else {
                filterBit = 0
            }
        }

        static let host = Name("Host")
        static let connection = Name("Connection")
        static let contentLength = Name("Content-Length")
        static let transferEncoding = Name("Transfer-Encoding")
        static let upgrade = Name("Upgrade")
        static let expect = Name("Expect")
        static let close = Name("close")
        static let keepAlive = Name("keep-alive")
        static let continue100 = Name("100-continue")
        static let h2c = Name("h2c")

        /// ASCII case-insensitive equality with wire bytes.
        @inline(__always)
        func matches(_ bytes: ArraySlice<UInt8>) -> Bool {
            bytes.count == lowercased.count && bytes.withUnsafeBufferPointer(matches)
        }

        func matches(_ string: String) -> Bool {
            var string = string
            return string.withUTF8(matches)
        }

        @inline(__always)
        private func matches(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
            guard b.count == lowercased.count else { return false }
            return lowercased.withUnsafeBufferPointer { w in
                for i in 0..<w.count where !asciiCaseInsensitiveEqualByte(b[i], w[i]) { return false }
                return true
            }
        }
    }
}

extension HTTPHeaders: Equatable {
    /// Equal when the fields are: same names (exact spelling) and values in the same order.
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        // Copies of one parsed section share their arrays, which makes this check O(1) for an unchanged head.
        if case .wire(let a) = lhs.storage, case .wire(let b) = rhs.storage, a == b { return true }
        return lhs.fields == rhs.fields
    }
}

extension HTTPHeaders: CustomReflectable {
    /// Shows the fields, whichever form they are kept in (test failures and debugger output).
    public var customMirror: Mirror { Mirror(self, children: ["fields": fields]) }
}

@inline(__always)
func asciiCaseInsensitiveEqualByte(_ x: UInt8, _ y: UInt8) -> Bool {
    x == y || (x | 0x20 == y | 0x20 && (x | 0x20) >= UInt8(ascii: "a") && (x | 0x20) <= UInt8(ascii: "z"))
}

@inline(__always)
func asciiLowercase(_ b: UInt8) -> UInt8 {
    b >= 0x41 && b <= 0x5A ? b | 0x20 : b
}

extension StringProtocol {
    func asciiLowercased() -> String {
        String(decoding: utf8.map(asciiLowercase), as: UTF8.self)
    }
}

/// A field name prepared once (lowercased, with its filter bit), for a lookup made on every request: asking for it
/// by string prepares the name again each time (an array per call), while a received head answers a prepared name
/// that it lacks from its name filter alone.
public struct HTTPFieldName: Sendable {
    let name: HTTPHeaders.Name

    public init(_ name: String) { self.name = HTTPHeaders.Name(name) }
}

extension HTTPHeaders {
    /// The first value of a field named `name`; nil without one.
    public func first(_ name: HTTPFieldName) -> String? {
        var value: String?
        forEachValue(of: name.name) { bytes in
            if value == nil { value = HTTP1Syntax.string(bytes) }
        }
        return value
    }

    /// Whether a field named `name` exists: `contains(name:)` without preparing the name again (about 1,400
    /// instructions and an allocation per call; a received head that lacks it answers from its name filter).
    public func contains(_ name: HTTPFieldName) -> Bool {
        contains(name.name)
    }

    /// Removes every field named `name` (case-insensitive): `remove(name:)` with a prepared name.
    public mutating func remove(_ name: HTTPFieldName) {
        guard contains(name.name) else { return }
        fields.removeAll { name.name.matches($0.name) }
    }
}
