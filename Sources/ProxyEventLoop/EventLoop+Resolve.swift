import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// Why a host name could not be resolved.
public struct ResolveError: Error, Equatable, Sendable, CustomStringConvertible {
    public let host: String
    /// The getaddrinfo error code (EAI_*).
    public let code: Int32
    /// The text from gai_strerror.
    public let message: String

    public var description: String { "cannot resolve \(host): \(message)" }
}

extension EventLoop {
    /// Resolves `host` to TCP addresses without blocking the loop: getaddrinfo runs on a Dispatch queue and
    /// `completion` runs back on this loop's thread (so it may use this loop's connections). Numeric hosts and
    /// `localhost` are answered at once, without a lookup. Loop thread only.
    public func resolve(
        host: String, port: UInt16, _ completion: @escaping (Result<[SocketAddress], ResolveError>) -> Void
    ) {
        preconditionInEventLoop()
        if let numeric = try? SocketAddress(numericHost: host, port: port) {
            // A numeric host needs no lookup; the error of the numeric parser only means "not numeric".
            enqueueDeferred { completion(.success([numeric])) }
            return
        }
        // Only the id and the Sendable result cross threads; the non-Sendable completion stays on the loop.
        let id = storeResolution(completion)
        DispatchQueue.global().async { [self] in
            let result = Self.lookUp(host: host, port: port)
            execute { self.completeResolution(id, result) }
        }
    }

    /// Blocking getaddrinfo; never call it on a loop thread.
    static func lookUp(host: String, port: UInt16) -> Result<[SocketAddress], ResolveError> {
        // AI_ADDRCONFIG skips address families this machine has no address for (no AAAA answers without IPv6).
        // Hosts with only loopback interfaces (containers) can then get no answer at all, so retry without it.
        var result = getAddressInfo(host: host, port: port, flags: AI_ADDRCONFIG)
        if case .failure = result { result = getAddressInfo(host: host, port: port, flags: 0) }
        return result
    }

    private static func getAddressInfo(host: String, port: UInt16, flags: Int32)
        -> Result<[SocketAddress], ResolveError>
    {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = flags
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            return .failure(ResolveError(host: host, code: rc, message: String(cString: gai_strerror(rc))))
        }
        defer { freeaddrinfo(first) }
        var addresses: [SocketAddress] = []
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let current = node {
            if let raw = current.pointee.ai_addr {
                var storage = sockaddr_storage()
                let length = min(Int(current.pointee.ai_addrlen), MemoryLayout<sockaddr_storage>.size)
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: raw, count: length)) }
                if let address = SocketAddress(storage: storage), !addresses.contains(address) {
                    addresses.append(address)
                }
            }
            node = current.pointee.ai_next
        }
        if addresses.isEmpty {
            return .failure(ResolveError(host: host, code: EAI_NONAME, message: "no TCP address"))
        }
        return .success(addresses)
    }
}
