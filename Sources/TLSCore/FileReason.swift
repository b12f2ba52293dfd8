import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Why a Foundation file operation on `path` failed, in the system's words ("No such file or directory") rather
/// than Foundation's ("The operation could not be completed. The file doesn't exist."), prefixed with the path it
/// failed on when that is another one (a parent folder). Foundation's text when there is no POSIX error under it.
public func fileReason(_ error: any Error, path: String) -> String {
    let error = error as NSError
    // `any Error`, bridged: swift-corelibs-foundation stores a Swift POSIXError there, not an NSError.
    guard let underlying = error.userInfo[NSUnderlyingErrorKey] as? any Error,
        (underlying as NSError).domain == NSPOSIXErrorDomain
    else { return error.localizedDescription }
    let reason = String(cString: strerror(Int32((underlying as NSError).code)))
    guard let failedPath = error.userInfo[NSFilePathErrorKey] as? String, failedPath != path else { return reason }
    return "\(failedPath): \(reason)"
}
