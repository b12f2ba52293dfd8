/// A consumer of the proxy's record stream: every finished exchange (`ProxyLog.exchange`, the record relays emit
/// and sessions complete), CFNetwork-style trace records, JSON events and notices. The console, the trace and the
/// JSON log are sinks; a new one (a capture store, a live view) is written as one type conforming to this protocol
/// and added with one line, `ProxyLogSink.add(_:)` (ProxyServer), without touching a relay or a session. Here, with
/// `ProxyLog`, so a sink in any module (CaptureStore's `CaptureSink`, WebView's `LiveFeed`) needs only ProxyTrace.
///
/// `consume` is called on the event-loop threads, in each session's order, from several threads at once: it must
/// be thread-safe and must not block on I/O. A sink that writes files or sockets does its I/O elsewhere: wrap it in
/// `QueuedSink` (ProxyServer), which runs it on a thread of its own behind a bounded queue with a stated overflow
/// policy.
public protocol LogSink: AnyObject, Sendable {
    /// Takes one entry. Entries a sink has no use for are ignored cheaply (a switch and a return): every sink sees
    /// every entry.
    func consume(_ entry: ProxyLog)
    /// Whether `consume` does anything with `entry`. A `QueuedSink` asks first, once per entry on the thread that made
    /// it, so entries its sink ignores (every exchange, for the trace) never take its lock or wake its thread; a sink
    /// may do the cheap part of its work here (`StandardErrorSink` counts a folded notice). Default: every entry.
    func accepts(_ entry: ProxyLog) -> Bool
    /// Writes out whatever is buffered, and returns when it is written (the proxy calls it before exiting).
    func flush()
}

extension LogSink {
    public func accepts(_ entry: ProxyLog) -> Bool { true }
}
