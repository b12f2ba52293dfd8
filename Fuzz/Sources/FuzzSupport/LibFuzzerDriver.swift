internal import CLibFuzzer

/// What libFuzzer calls with each input; returns 0 (the input was handled).
public typealias FuzzTarget = @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt

/// Hands the process to libFuzzer with `target` and this process's arguments, and returns its exit status.
///
/// Harnesses have their own `main` that calls this, rather than defining `LLVMFuzzerTestOneInput` for libFuzzer's
/// `main`: SwiftPM renames an executable's entry point, which leaves a library-only harness without one.
public func runLibFuzzer(_ target: FuzzTarget) -> CInt {
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    return LLVMFuzzerRunDriver(&argc, &argv, target)
}
