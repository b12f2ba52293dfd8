// swift-tools-version:6.0
import PackageDescription

/// Every Swift target builds in the Swift 6 language mode.
let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "ATSProxy",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "atsproxy", targets: ["atsproxy"]),
        // Only for the fuzz package in Fuzz/ (a package can depend on another's products, not its targets);
        // `swift build` builds these modules anyway, so the product adds no work here.
        .library(
            name: "ATSProxyCores",
            targets: ["ATSPolicy", "HTTP1Core", "HTTP2Core", "TLSCore", "PolicyLoader", "ProxyTrace", "ProxyCore"]),
        // The same, for the harnesses that query a capture: the filter language and the web view's router
        // (Fuzz/Sources/fuzz-filter, fuzz-web-router).
        .library(name: "ATSProxyCapture", targets: ["CaptureStore", "ProxyTrace", "CaptureExport", "ATSReport", "WebView"]),
        // The same, for the WireGuard harness (Fuzz/Sources/fuzz-wireguard): its protocol core alone.
        .library(name: "ATSProxyWireGuard", targets: ["WireGuardCore"]),
        // The same, for the rules harness (Fuzz/Sources/fuzz-rules): the rule parsers and the filter language.
        .library(name: "ATSProxyRules", targets: ["TrafficRules", "FilterCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // SQLite for capture files (CaptureStore), on the system's libsqlite3 (libsqlite3-dev).
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
    ],
    targets: [
        // C libraries, reached only through these header-only system-library targets.
        .systemLibrary(name: "CLinuxShims", path: "Sources/CLinuxShims"),
        // zlib, reached only through the Inflate target.
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(
            name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        .systemLibrary(
            name: "CNghttp2", path: "Sources/CNghttp2", pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]),
        // libpq (PostgreSQL's client library, libpq-dev): the team store, `--capture postgresql://…`. Its blocking
        // calls run on the capture's writer thread and in the reading commands, never on an event loop.
        .systemLibrary(
            name: "CLibPQ", path: "Sources/CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        // SQLite's process-wide configuration (sqlite3_config is variadic: Swift cannot call it).
        .systemLibrary(name: "CSQLiteConfig", path: "Sources/CSQLiteConfig", providers: [.apt(["libsqlite3-dev"])]),

        // Pure cores: bytes and values in, values out. No file descriptors, no clocks.
        .target(name: "ATSPolicy", swiftSettings: strict),
        // Ordered JSON values, written by hand: lint's reports and HAR exports.
        .target(name: "OrderedJSON", swiftSettings: strict),
        .target(name: "ATSLint", dependencies: ["ATSPolicy", "OrderedJSON"], swiftSettings: strict),
        .target(name: "HTTP1Core", swiftSettings: strict),
        .target(name: "HTTP2Core", dependencies: ["CNghttp2", "HTTP1Core"], swiftSettings: strict),
        .target(name: "TLSCore", dependencies: ["COpenSSL", "ATSPolicy"], swiftSettings: strict),
        .target(name: "ProxyTrace", dependencies: ["ATSPolicy", "HTTP1Core"], swiftSettings: strict),
        // The filter language (`show --filter`, rules): its parser, condition tree and in-memory evaluator.
        .target(name: "FilterCore", dependencies: ["ProxyTrace"], swiftSettings: strict),
        // Rules that change traffic (issue 33): the rule model, and its parsers for CLI options and rules files.
        .target(name: "TrafficRules", dependencies: ["FilterCore"], swiftSettings: strict),
        // The proxy's own set-up pages for a device (the CA's downloads, the iOS steps, a trust check; in WireGuard
        // mode the devices' configurations and their QR codes, given as plain text: it needs no WireGuardCore).
        .target(name: "Onboarding", dependencies: ["QRCode"], swiftSettings: strict),
        // A QR code encoder (byte mode) and its terminal and SVG renderings (the set-up page's address at start-up,
        // WireGuard configurations in the banner and on the set-up page).
        .target(name: "QRCode", swiftSettings: strict),
        // WireGuard (Noise IKpsk2 over OpenSSL's primitives) and the tunnel's minimal IP layer: datagrams and a
        // clock in, datagrams and IP packets out (docs/wireguard.md).
        .target(name: "WireGuardCore", dependencies: ["COpenSSL"], swiftSettings: strict),
        // Network Link Conditioner profiles and a sans-io traffic shaper: byte counts and instants in, how many
        // bytes may go and when to ask again out (docs/rules-throttle.md).
        .target(name: "Throttle", swiftSettings: strict),
        // The one rules stage (issue 33): the rules in force (RuleBook) and what they decide at each point of an
        // exchange, as pure functions of what it has shown so far (docs/rules.md).
        .target(
            name: "RuleStage",
            dependencies: ["TrafficRules", "TrafficActions", "FilterCore", "Throttle", "HTTP1Core", "ProxyTrace"],
            swiftSettings: strict),
        .target(
            name: "ProxyCore",
            dependencies: [
                "ATSPolicy", "TLSCore", "HTTP1Core", "HTTP2Core", "ProxyTrace", "RuleStage", "Throttle", "TrafficActions",
                "TrafficRules",
            ],
            swiftSettings: strict),

        // Edges: files and sockets.
        .target(
            name: "PolicyLoader",
            dependencies: ["ATSPolicy", "Inflate"],
            swiftSettings: strict),
        // zlib's inflate over a buffer, bounded: an .ipa's Info.plist, captured gzip and deflate bodies.
        .target(name: "Inflate", dependencies: ["CZlib"], swiftSettings: strict),
        .target(name: "ProxyEventLoop", dependencies: ["CLinuxShims"], swiftSettings: strict),
        // The rules' traffic-changing actions as pure functions (map local, modify headers and body, answer): heads
        // and bodies in, changed heads and bodies out; files only through an injectable reader (docs/rules.md).
        .target(name: "TrafficActions", dependencies: ["HTTP1Core", "Inflate", "CZlib"], swiftSettings: strict),
        // Capture files: every exchange record in a SQLite database (writer and reader), through GRDB.
        .target(
            name: "CaptureStore",
            dependencies: [
                "ATSPolicy", "HTTP1Core", "ProxyTrace", "FilterCore", .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for binding the writer's rows without GRDB's per-value boxing (SQLiteInsert).
                .product(name: "GRDBSQLite", package: "GRDB.swift"), "CSQLiteConfig", "CLibPQ",
            ],
            swiftSettings: strict),
        // Reading captures back: HAR 1.2 export and the full text of one exchange (`har`, `show`, the live view).
        .target(
            name: "CaptureExport",
            dependencies: ["CaptureStore", "ATSPolicy", "HTTP1Core", "ProxyTrace", "Inflate", "OrderedJSON"],
            swiftSettings: strict),
        // `atsproxy report`: a policy against observed traffic (a capture, or a live session's exchange records).
        .target(
            name: "ATSReport", dependencies: ["ATSPolicy", "ProxyTrace", "CaptureStore"], swiftSettings: strict),
        .target(
            name: "ProxyServer", dependencies: ["ProxyCore", "ProxyEventLoop", "ProxyTrace", "Onboarding", "Throttle"],
            swiftSettings: strict),
        // The live web view (`run --web`, `view`): its HTTP routes over the capture, served on the proxy's own loops.
        .target(
            name: "WebView",
            dependencies: ["ATSPolicy", "CaptureStore", "HTTP1Core", "ProxyCore", "ProxyEventLoop", "ProxyTrace", "TLSCore"],
            exclude: ["Assets"], swiftSettings: strict),
        .target(
            name: "ATSDiagnose", dependencies: ["ATSPolicy", "TLSCore", "ProxyEventLoop"],
            swiftSettings: strict),

        .executableTarget(
            name: "atsproxy",
            dependencies: [
                "ATSPolicy", "ATSLint", "PolicyLoader", "TLSCore", "ATSDiagnose", "ProxyEventLoop", "ProxyCore", "ProxyServer",
                "ProxyTrace", "ATSReport", "CaptureStore", "CaptureExport", "Onboarding", "QRCode", "WebView",
                "WireGuardCore", "TrafficRules", "RuleStage", "Throttle",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),

        // The protocol core's user-space cost per request, in memory (`swift run -c release proxycore-bench`).
        .executableTarget(
            name: "proxycore-bench", dependencies: ["ATSPolicy", "TLSCore", "ProxyCore", "ProxyTrace", "CaptureStore"],
            path: "Sources/ProxyCoreBenchmark", swiftSettings: strict),
        // A lean keep-alive HTTP/1.1 load client for benchmarks/proxybench.py: a fixed set of connections, one event
        // loop, closed-loop requests (`swift build -c release --product atsproxy-load`).
        .executableTarget(
            name: "atsproxy-load",
            dependencies: [
                "TLSCore", "ProxyEventLoop", "HTTP1Core",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/ProxyLoad", swiftSettings: strict),

        // Helpers several test targets share (an openssl s_server runner, XML/binary plist fixtures, a byte mutator).
        .target(name: "TestSupport", path: "Tests/TestSupport", exclude: ["Scripts"], swiftSettings: strict),
        // Foundation's URLSession (libcurl on Linux) as a client of the running proxy, for the end-to-end tests.
        .executableTarget(name: "urlsession-probe", path: "Tests/URLSessionProbe", swiftSettings: strict),
        .testTarget(name: "InflateTests", dependencies: ["Inflate"], swiftSettings: strict),
        .testTarget(
            name: "TrafficActionsTests", dependencies: ["TrafficActions", "HTTP1Core", "Inflate", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "OrderedJSONTests", dependencies: ["OrderedJSON"], swiftSettings: strict),
        .testTarget(name: "TestSupportTests", dependencies: ["TestSupport"], swiftSettings: strict),
        .testTarget(name: "ATSPolicyTests", dependencies: ["ATSPolicy", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "ATSLintTests", dependencies: ["ATSLint", "PolicyLoader", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "PolicyLoaderTests", dependencies: ["PolicyLoader", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "TLSCoreTests", dependencies: ["TLSCore", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "HTTP1CoreTests", dependencies: ["HTTP1Core", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "HTTP2CoreTests", dependencies: ["HTTP2Core", "HTTP1Core"], swiftSettings: strict),
        .testTarget(
            name: "ProxyCoreTests",
            dependencies: [
                "ProxyCore", "HTTP2Core", "TestSupport", "Onboarding", "ProxyServer", "RuleStage", "Throttle", "TrafficRules",
                "TrafficActions", "Inflate",
            ],
            swiftSettings: strict),
        .testTarget(name: "OnboardingTests", dependencies: ["Onboarding", "QRCode"], swiftSettings: strict),
        .testTarget(name: "WireGuardCoreTests", dependencies: ["WireGuardCore"], swiftSettings: strict),
        .testTarget(name: "ThrottleTests", dependencies: ["Throttle"], swiftSettings: strict),
        .testTarget(
            name: "RuleStageTests", dependencies: ["RuleStage", "TrafficRules", "TrafficActions", "HTTP1Core", "ProxyTrace"],
            swiftSettings: strict),
        .testTarget(name: "QRCodeTests", dependencies: ["QRCode", "TestSupport"], swiftSettings: strict),
        .testTarget(name: "FilterCoreTests", dependencies: ["FilterCore", "ProxyTrace"], swiftSettings: strict),
        .testTarget(name: "TrafficRulesTests", dependencies: ["TrafficRules", "FilterCore"], swiftSettings: strict),
        .testTarget(name: "ProxyTraceTests", dependencies: ["ProxyTrace", "TestSupport"], swiftSettings: strict),
        .testTarget(
            name: "CaptureStoreTests",
            dependencies: ["CaptureStore", "ProxyTrace", "ATSPolicy", "HTTP1Core", "TestSupport",
                           .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict),
        .testTarget(
            name: "WebViewTests",
            dependencies: ["WebView", "CaptureStore", "ProxyTrace", "ATSPolicy", "HTTP1Core", "ProxyCore", "ProxyEventLoop", "TestSupport"],
            swiftSettings: strict),
        .testTarget(
            name: "CaptureExportTests",
            dependencies: ["CaptureExport", "CaptureStore", "ProxyTrace", "ATSPolicy", "HTTP1Core", "TestSupport"],
            exclude: ["Golden", "Schema"], swiftSettings: strict),
        .testTarget(
            name: "ATSReportTests", dependencies: ["ATSReport", "ATSPolicy", "PolicyLoader", "CaptureStore", "ProxyTrace"],
            swiftSettings: strict),
        .testTarget(name: "ATSDiagnoseTests", dependencies: ["ATSDiagnose"], swiftSettings: strict),
        .testTarget(
            name: "ProxyEndToEndTests",
            dependencies: [
                "atsproxy", "urlsession-probe", "ProxyCore", "ProxyServer", "TLSCore", "ATSPolicy", "TestSupport",
                "CaptureStore",
            ],
            // The Python and shell programs the tests run, found by path (Support/E2EScript.swift).
            exclude: ["Scripts"],
            swiftSettings: strict),
        .testTarget(name: "ProxyEventLoopTests", dependencies: ["ProxyEventLoop"], swiftSettings: strict),
        .testTarget(
            name: "ProxyServerTests",
            dependencies: [
                "ProxyServer", "ProxyEventLoop", "ProxyCore", "ProxyTrace", "ATSPolicy", "HTTP1Core", "TestSupport",
            ],
            swiftSettings: strict),
        // The load client's connection state machine in memory, and the built `atsproxy-load` against a local server.
        .testTarget(
            name: "ProxyLoadTests",
            dependencies: ["atsproxy-load", "TLSCore", "HTTP1Core", "ProxyEventLoop", "TestSupport"],
            swiftSettings: strict),
        // The team store against a real PostgreSQL that the tests start and stop (a throwaway cluster, docs/team-store.md).
        .testTarget(
            name: "TeamStoreTests",
            dependencies: ["atsproxy", "TestSupport", "CaptureStore", "ProxyTrace", "ATSPolicy", "HTTP1Core"],
            exclude: ["Scripts"], swiftSettings: strict),
        // Runs the built `atsproxy` binary as a user would, against local servers on 127.0.0.1.
        .testTarget(
            name: "CLITests",
            dependencies: ["atsproxy", "TestSupport", "CaptureStore", "ProxyTrace", "ATSPolicy", "HTTP1Core"],
            swiftSettings: strict),
    ]
)
