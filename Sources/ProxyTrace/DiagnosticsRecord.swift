/// One CFNETWORK_DIAGNOSTICS-style record: a titled block of `Key: value` lines (reference §5.2).
///
/// The first line is `Title: subject` (`TCP Connection Start: (null)`, `Protocol Enqueue: request GET <url>
/// HTTP/1.1`); the fields follow, right-aligned on the colon as CFNetwork prints them.
public struct DiagnosticsRecord: Sendable, Equatable {
    public var title: String
    public var subject: String
    public var fields: [Field]
    /// The lowest `--diagnostics` level at which this record is written.
    public var level: Int
    /// The client connection the record belongs to, set where records leave their session (the proxy server), so
    /// that a sink that keeps them (a capture) can file them per connection; not printed.
    public var connectionID: UInt64?

    public struct Field: Sendable, Equatable {
        public var key: String
        public var value: String
        /// The lowest `--diagnostics` level at which the field is written: 2 for headers and TLS details, as
        /// CFNetwork adds them at its level 2.
        public var level: Int
        public init(_ key: String, _ value: String, level: Int = 1) {
            self.key = key
            self.value = value
            self.level = level
        }
    }

    public init(title: String, subject: String = "(null)", fields: [Field] = [], level: Int = 1) {
        self.title = title
        self.subject = subject
        self.fields = fields
        self.level = level
    }
}
