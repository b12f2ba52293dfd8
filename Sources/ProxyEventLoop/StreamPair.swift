import CLinuxShims
#if canImport(Glibc)
import Glibc
#endif

// A byte stream that is not a socket of the network (a TCP connection inside a WireGuard tunnel, carried by the
// proxy's own small TCP) reaches the proxy's sessions through a local socket pair: one end is a Connection on the
// loop that owns the tunnel, the other is adopted like an accepted client. The sessions and the server adapter then
// need no second kind of connection, at the cost of one more copy through the kernel.

extension EventLoop {
    /// Makes a connected pair of local stream sockets; the near end becomes a Connection on this loop driven by
    /// `handler`, and the far end's descriptor is returned for `adopt(fd:handler:)` (on any loop). Loop thread only.
    public func makeStreamPair(handler: any ConnectionHandler) throws(IOError) -> Int32 {
        preconditionInEventLoop()
        var fds: [Int32] = [-1, -1]
        _ = try fds.withUnsafeMutableBufferPointer { (pointer) throws(IOError) in
            try syscall("socketpair") { clinux_stream_pair(pointer.baseAddress) }
        }
        guard fds[0] >= 0, fds[1] >= 0 else { throw IOError(errnoCode: EAGAIN, call: "socketpair") }
        Connection.adopt(fd: fds[0], on: self, handler: handler)
        return fds[1]
    }

    /// Adopts a connected stream socket (the far end of `makeStreamPair`) as a Connection on this loop driven by
    /// `handler`; from any thread. The descriptor is closed if the loop has shut down.
    public func adopt(fd: Int32, handler: @escaping @Sendable (EventLoop) -> any ConnectionHandler) {
        if inEventLoop {
            Connection.adopt(fd: fd, on: self, handler: handler(self))
        } else if !submit({ Connection.adopt(fd: fd, on: self, handler: handler(self)) }) {
            closeDescriptor(fd)
        }
    }
}
