// swift-tools-version:6.0
import PackageDescription

// libFuzzer harnesses for the parsers and sessions that take bytes off the wire or from a file. A package of its own,
// so the main package's `swift build` / `swift test` never compile them; `scripts/fuzz` builds it with
// `-sanitize=fuzzer,address`; each harness's main hands its input function to libFuzzer.

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// One executable per harness; `scripts/fuzz NAME` runs `fuzz-NAME`.
func harness(_ name: String, products: [String] = ["ATSProxyCores"], extra: [Target.Dependency] = []) -> Target {
    .executableTarget(
        name: "fuzz-\(name)",
        dependencies: ["FuzzSupport"] + extra + products.map { .product(name: $0, package: "ATSProxy") },
        swiftSettings: strict)
}

let package = Package(
    name: "ATSProxyFuzz",
    dependencies: [.package(name: "ATSProxy", path: "..")],
    targets: [
        .systemLibrary(name: "CLibFuzzer", path: "Sources/CLibFuzzer"),
        .target(name: "FuzzSupport", dependencies: ["CLibFuzzer"], swiftSettings: strict),
        // The small capture the filter and web-router harnesses query.
        .target(
            name: "FuzzCapture",
            dependencies: [
                .product(name: "ATSProxyCores", package: "ATSProxy"), .product(name: "ATSProxyCapture", package: "ATSProxy"),
            ],
            swiftSettings: strict),
        harness("http1"),
        harness("tls-hello"),
        harness("plist"),
        harness("h2"),
        harness("proxy-session"),
        harness("filter", products: ["ATSProxyCores", "ATSProxyCapture"], extra: ["FuzzCapture"]),
        harness("web-router", products: ["ATSProxyCores", "ATSProxyCapture"], extra: ["FuzzCapture"]),
        harness("wireguard", products: ["ATSProxyWireGuard"]),
        harness("tunnel-tcp", products: ["ATSProxyWireGuard"]),
        harness("rules", products: ["ATSProxyRules"]),
    ]
)
