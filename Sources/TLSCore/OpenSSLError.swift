internal import COpenSSL

/// A failure reported by OpenSSL, with the whole error queue drained at the point of failure.
///
/// Every wrapper clears the queue before the call whose failure it reports (house style §6.2 "clear, call, drain"),
/// so `entries` belong to that call only.
public struct OpenSSLError: Error, Hashable, Sendable, CustomStringConvertible {
    /// One entry of OpenSSL's error queue.
    public struct Entry: Hashable, Sendable, CustomStringConvertible {
        /// The packed error code (`ERR_get_error`).
        public let code: UInt
        /// Library name, e.g. `SSL routines`.
        public let library: String
        /// Reason text, e.g. `wrong version number`.
        public let reason: String
        /// Reason number within the library (`ERR_GET_REASON`).
        public let reasonCode: Int32

        public var description: String { "\(library): \(reason)" }
    }

    /// What we were doing, e.g. `SSL_CTX_use_PrivateKey`.
    public let context: String
    public let entries: [Entry]

    public init(context: String, entries: [Entry]) {
        self.context = context
        self.entries = entries
    }

    public var description: String {
        entries.isEmpty
            ? "\(context) failed" : "\(context) failed: " + entries.map(\.description).joined(separator: "; ")
    }

    /// Drains OpenSSL's thread-local error queue into an error labelled with `context`.
    static func drain(_ context: String) -> OpenSSLError {
        var entries: [Entry] = []
        // Bounded: the queue holds at most ERR_NUM_ERRORS (16) entries.
        for _ in 0..<64 {
            let code = ERR_get_error()
            if code == 0 { break }
            let lib = ERR_lib_error_string(code).map { String(cString: $0) } ?? "lib(\(copenssl_ERR_GET_LIB(code)))"
            let reason =
                ERR_reason_error_string(code).map { String(cString: $0) }
                ?? "reason(\(copenssl_ERR_GET_REASON(code)))"
            entries.append(Entry(code: code, library: lib, reason: reason, reasonCode: copenssl_ERR_GET_REASON(code)))
        }
        return OpenSSLError(context: context, entries: entries)
    }

    /// Clears the queue so the next failure's entries belong to the next call. OpenSSL 3.0's ERR_clear_error resets
    /// all sixteen slots every time, a measurable share of a small record's cost; the queue is nearly always empty,
    /// and looking costs less than clearing.
    static func clear() {
        if ERR_peek_error() != 0 { ERR_clear_error() }
    }
}

/// Runs an OpenSSL call that signals success with `1` (or any positive value), draining the queue on failure.
@discardableResult
func checkPositive(_ context: String, _ body: () -> Int32) throws(OpenSSLError) -> Int32 {
    OpenSSLError.clear()
    let rc = body()
    guard rc > 0 else { throw OpenSSLError.drain(context) }
    return rc
}

/// Runs an OpenSSL call that returns an object pointer, draining the queue when it returns NULL.
func checkNotNull<T>(_ context: String, _ body: () -> T?) throws(OpenSSLError) -> T {
    OpenSSLError.clear()
    guard let value = body() else { throw OpenSSLError.drain(context) }
    return value
}
