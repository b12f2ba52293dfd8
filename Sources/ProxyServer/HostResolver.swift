import Dispatch
import Foundation
import ProxyEventLoop

#if canImport(Glibc)
    import Glibc
#endif

/// Resolves upstream host names off the loop threads (getaddrinfo blocks), then continues on the loop.
enum HostResolver {
    private static let queue = DispatchQueue(label: "atsproxy.resolver", attributes: .concurrent)

    /// Calls `done` on `loop` with the first address of `host` (IPv4 preferred, as most origins answer there), or an
    /// error message. Numeric hosts and `localhost` never leave the loop.
    static func resolve(
        _ host: String, port: Int, on loop: EventLoop,
        done: @escaping @Sendable (Result<SocketAddress, ResolveError>) -> Void
    ) {
        if let numeric = try? SocketAddress(numericHost: host, port: UInt16(clamping: port)) {
            done(.success(numeric))
            return
        }
        queue.async {
            let result = lookup(host, port: port)
            loop.execute { done(result) }
        }
    }

    struct ResolveError: Error, CustomStringConvertible {
        var description: String
    }

    private static func lookup(_ host: String, port: Int) -> Result<SocketAddress, ResolveError> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, nil, &hints, &list)
        guard rc == 0, let first = list else {
            return .failure(ResolveError(description: "cannot resolve \(host): \(String(cString: gai_strerror(rc)))"))
        }
        defer { freeaddrinfo(first) }
        var candidates: [String] = []
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let n = node {
            var buffer = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(n.pointee.ai_addr, n.pointee.ai_addrlen, &buffer, socklen_t(buffer.count), nil, 0,
                           NI_NUMERICHOST) == 0 {
                let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if n.pointee.ai_family == AF_INET { candidates.insert(text, at: 0) } else { candidates.append(text) }
            }
            node = n.pointee.ai_next
        }
        for text in candidates {
            if let address = try? SocketAddress(numericHost: text, port: UInt16(clamping: port)) { return .success(address) }
        }
        return .failure(ResolveError(description: "no usable address for \(host)"))
    }
}
