import HTTP1Core
import ProxyEventLoop
import TLSCore

/// Why a load connection ended before the run did. Each one counts as an error and the connection is replaced.
enum LoadFailure: Error, Equatable, CustomStringConvertible {
    /// The proxy answered the CONNECT with a non-2xx status.
    case tunnelRefused(status: Int)
    case tls(TLSError)
    case http(HTTP1Error)
    /// The server closed the connection (EOF or close_notify) where a response could not be under way.
    case closedByServer
    /// The server's last response said the connection ends after it (`Connection: close`, or a close-delimited body).
    case notKeepAlive
    /// The socket failed (connect refused or timed out, reset, …).
    case transport(IOError)

    var description: String {
        switch self {
        case .tunnelRefused(let status): "proxy refused CONNECT with status \(status)"
        case .tls(let error): "TLS: \(error)"
        case .http(let error): "\(error)"
        case .closedByServer: "connection closed by the server"
        case .notKeepAlive: "the server ended keep-alive (Connection: close)"
        case .transport(let error): "\(error)"
        }
    }
}
