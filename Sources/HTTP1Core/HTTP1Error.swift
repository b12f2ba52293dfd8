/// A protocol error found by the HTTP/1 codec.
///
/// Following h11, errors are split by who broke the protocol: `.remote` means the peer sent something invalid
/// (answer with ``suggestedStatus`` if you are the server side, then close), `.local` means our own side tried
/// to do something the protocol forbids (a bug or a misuse of the API).
public struct HTTP1Error: Error, Equatable, Sendable, CustomStringConvertible {
    /// Which side broke the protocol.
    public enum Side: Equatable, Sendable {
        case local
        case remote
    }

    /// What went wrong. Stable for tests and for choosing a response.
    public enum Reason: Equatable, Sendable {
        case invalidStartLine
        case unsupportedVersion
        case invalidMethod
        case invalidTarget
        case invalidStatus
        case startLineTooLong
        case headerSectionTooLarge
        case tooManyHeaders
        case invalidHeaderName
        case invalidHeaderValue
        case whitespaceBeforeColon
        case obsoleteLineFolding
        /// Both Content-Length and Transfer-Encoding: a request-smuggling vector (RFC 9112 §6.3 item 3).
        case contentLengthWithTransferEncoding
        /// Several Content-Length values that differ (RFC 9112 §6.3 item 5).
        case conflictingContentLength
        case invalidContentLength
        /// Transfer-Encoding whose final coding is not `chunked` (RFC 9112 §6.3 item 4), or an unknown coding.
        case unsupportedTransferEncoding
        /// Transfer-Encoding in an HTTP/1.0 message (RFC 9112 §6.1: treat framing as faulty).
        case transferEncodingInHTTP10
        case invalidChunkSize
        case chunkSizeOverflow
        case chunkLineTooLong
        case invalidChunkTerminator
        case bodyTooLarge
        /// The peer closed the connection in the middle of a message.
        case incompleteMessage
        /// The peer sent bytes when none may come (e.g. a response with no request outstanding).
        case unexpectedData
        /// Our body did not match the framing we announced.
        case bodyLengthMismatch
        /// We asked for another message on a connection that must close.
        case connectionMustClose
        /// We called the codec in a state where the call makes no sense.
        case invalidState
    }

    public let side: Side
    public let reason: Reason
    /// The HTTP status a server should answer with (400, 413, 414, 431, 501, 505; 502 for upstream errors).
    public let suggestedStatus: Int
    /// A human-readable explanation.
    public let detail: String

    public init(_ side: Side, _ reason: Reason, status: Int, detail: String) {
        self.side = side
        self.reason = reason
        self.suggestedStatus = status
        self.detail = detail
    }

    public var description: String { "HTTP/1 \(side) protocol error (\(reason), \(suggestedStatus)): \(detail)" }
}
