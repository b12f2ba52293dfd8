import Foundation

/// Origins found to close connections that do not offer h2 (see `retryOfferingH2IfClosedBeforeRequest`). Later
/// connections to them offer h2 from the start, as a browser remembers an origin's protocol, instead of paying a
/// failed connection each time. Shared by every loop thread; bounded (cleared when full).
final class H2OnlyOrigins: @unchecked Sendable {
    // @unchecked: `origins` is only touched under `lock`.
    private let lock = NSLock()
    private var origins: Set<String> = []
    private let capacity = 1024

    func contains(host: String, port: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return origins.contains("\(host):\(port)")
    }

    /// Returns false when the origin was already known.
    @discardableResult
    func insert(host: String, port: Int) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if origins.count >= capacity { origins.removeAll(keepingCapacity: true) }
        return origins.insert("\(host):\(port)").inserted
    }
}
