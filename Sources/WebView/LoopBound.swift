import ProxyEventLoop

/// A loop-confined object carried across threads only to be handed back to its loop (`EventLoop.execute`): the
/// worker that ran a query holds it, never uses it, and the closure it submits runs on the object's own thread.
struct LoopBound<Value: AnyObject>: @unchecked Sendable {
    // @unchecked: `value` is only dereferenced on the loop thread that owns it.
    let value: Value
    init(_ value: Value) { self.value = value }
}
