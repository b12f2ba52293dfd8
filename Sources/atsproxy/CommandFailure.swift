import ArgumentParser
import Foundation

/// Writes `message` to stderr and returns the exit status to throw: `throw failure("…", status: 2)`.
///
/// Commands throw instead of exiting from inside `catch` blocks: the Swift 6.3 optimizer crashed ("swifterror value
/// can only be loaded and stored from…") compiling a `Never`-returning exit in the `catch` of a typed-throwing call,
/// which broke the release build.
func failure(_ message: String, status: Int32 = 1) -> ExitCode {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    return ExitCode(status)
}
