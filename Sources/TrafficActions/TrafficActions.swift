import HTTP1Core

// Theory of operation
//
// The rules stage (wired in ProxyCore later, through the relays' decide/resolve seam) decides WHICH rules apply to
// an exchange; this module only does WHAT an action does, as pure functions of values:
//
//   MapLocal.respond        request (method, URL, headers) + rule + FileReading  → a local response, or nil
//   HeaderModification      a head's headers + the matching modifications        → changed headers
//   BodyModification        a head + body + the matching modifications           → changed head and body
//   CannedAnswer.response   status, headers, text or file body                   → a local response
//
// No sockets, no clocks, no shared state. Files are read only through `FileReading` (POSIXFileReader in production,
// a real temporary directory in the tests), and only by map local and answers with a file body. Every action
// returns what changed: the original and the changed head (for the web view's detail pane) and `ActionNotice`s
// saying what was left alone and why (a brotli body, a body over the limit, a path outside a mapped directory).
//
// Bodies are whole, bounded buffers: a rule that rewrites a body needs all of it (a regex may span any two
// chunks, and gzip's trailer is at the end), and a local file is read into memory up to `limit` bytes. A file
// larger than that is answered with a 500 that says so, unless the request's Range asks for a part within the limit
// (so a video player seeking in a large local .mp4 still works). Streaming a huge file is left for later: the
// relays have no file-backed body source yet, and mocking an endpoint rarely needs one.

/// Something an action wants the user to know: what it left alone and why, or what it refused.
public struct ActionNotice: Error, Equatable, Sendable, CustomStringConvertible {
    /// The kind of notice, for the web view's icon and for tests.
    public enum Kind: String, Equatable, Sendable {
        /// A body left unchanged because its type is not text (or its charset unknown or its bytes invalid in it).
        case notText
        /// A body left unchanged because of an encoding this module does not re-encode (br, zstd, stacked codings).
        case unsupportedEncoding
        /// A body left unchanged because it (or its decoded form) is over the limit.
        case tooLarge
        /// A compressed body that did not decode (corrupt or truncated): left unchanged.
        case undecodable
        /// A map-local request for a path outside the mapped directory (`..`, a symlink out): answered 404.
        case outsideDirectory
        /// A map-local file that does not exist (or cannot be read): answered 404.
        case missingFile
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

/// A response made locally, without contacting the upstream: map local and answers.
public struct LocalResponse: Equatable, Sendable {
    /// The head to send the client (Content-Length set to the body's length, or the full length for HEAD).
    public var head: HTTPResponseHead
    /// The body to send: empty for HEAD, 304, 416 and 204.
    public var body: [UInt8]
    /// The file on disk that answered (its real path), if any: for the trace and the web view.
    public var servedFile: String?
    public var notices: [ActionNotice]

    public init(head: HTTPResponseHead, body: [UInt8], servedFile: String? = nil, notices: [ActionNotice] = []) {
        self.head = head
        self.body = body
        self.servedFile = servedFile
        self.notices = notices
    }
}

/// What a rewrite did to a head: both versions for the web view, whether anything changed, and notices.
public struct HeadChange<Head: Equatable & Sendable>: Equatable, Sendable {
    public var original: Head
    public var changed: Head
    public var notices: [ActionNotice]

    /// Whether the head differs from the original.
    public var isChanged: Bool { original != changed }

    public init(original: Head, changed: Head, notices: [ActionNotice] = []) {
        self.original = original
        self.changed = changed
        self.notices = notices
    }
}

/// Why a rule's action cannot be loaded: reported with the rule when the rules are loaded, before any is applied.
public struct RuleActionError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
