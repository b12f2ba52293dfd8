/// The sans-io driver of one connection. Every method is called on the connection's loop thread, never concurrently,
/// and never re-entrantly from inside a command the handler issued (notifications caused by commands, such as
/// `closed` after `close()`, are delivered after the current callback returns).
///
/// The handler is retained by its connection until `connectionClosed` has been delivered, then released.
public protocol ConnectionHandler: AnyObject {
    /// The connection is established (accepted, or an outbound connect completed). Writes are accepted even before.
    func connectionOpened(_ connection: Connection)
    /// Bytes arrived. `bytes` points into the loop's shared read buffer and is valid only during this call: copy or
    /// forward (`Connection.write(_:)` copies only what the socket does not take at once).
    func connection(_ connection: Connection, received bytes: UnsafeRawBufferPointer)
    /// The peer shut down its sending side (read EOF). Writing is still possible: half-close.
    func connectionReadEOF(_ connection: Connection)
    /// The write buffer crossed the high-water mark (`false`) or drained below the low-water mark again (`true`).
    func connection(_ connection: Connection, writabilityChanged writable: Bool)
    /// A timer started with `Connection.startTimer(after:)` fired.
    func connection(_ connection: Connection, timerFired timer: TimerID)
    /// The connection made no progress for the delay given to `Connection.setQuietNotice(after:)`.
    func connectionBecameQuiet(_ connection: Connection)
    /// The loop is shutting down gracefully: finish the exchange in flight, then close.
    func connectionShutdownRequested(_ connection: Connection)
    /// The connection is closed; `error` is nil for an orderly close. Called exactly once, last.
    func connectionClosed(_ connection: Connection, error: IOError?)
}

extension ConnectionHandler {
    public func connectionOpened(_ connection: Connection) {}
    public func connectionReadEOF(_ connection: Connection) {}
    public func connection(_ connection: Connection, writabilityChanged writable: Bool) {}
    public func connection(_ connection: Connection, timerFired timer: TimerID) {}
    public func connectionBecameQuiet(_ connection: Connection) {}
    /// By default a connection asked to shut down is closed once its queued bytes are written.
    public func connectionShutdownRequested(_ connection: Connection) { connection.close() }
    public func connectionClosed(_ connection: Connection, error: IOError?) {}
}

/// Identifies a timer on one loop.
public struct TimerID: Hashable, Sendable {
    let raw: UInt64
}

/// Identifies a connection by value, never by fd (fds are reused).
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    /// The index of the owning loop in its group.
    public let loopIndex: Int
    /// A counter unique within that loop.
    public let serial: UInt64
    public var description: String { "\(loopIndex)-\(serial)" }
}

/// Buffering limits of a connection's write side.
public struct WriteBufferLimits: Equatable, Sendable {
    /// Above this many queued bytes the connection reports itself not writable.
    public var highWater: Int
    /// Below this many queued bytes a connection that was not writable becomes writable again.
    public var lowWater: Int

    public init(highWater: Int = 256 * 1024, lowWater: Int = 64 * 1024) {
        self.highWater = highWater
        self.lowWater = min(lowWater, highWater)
    }
}
