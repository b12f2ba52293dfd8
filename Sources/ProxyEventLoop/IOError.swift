#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: the errno it set and the call that failed.
public struct IOError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The `errno` value, e.g. `ECONNREFUSED`.
    public let errnoCode: Int32
    /// The system call (or operation) that failed, e.g. "connect".
    public let call: String

    public init(errnoCode: Int32, call: String) {
        self.errnoCode = errnoCode
        self.call = call
    }

    public var description: String {
        "\(call) failed: \(String(cString: strerror(errnoCode))) (errno \(errnoCode))"
    }
}
