import ArgumentParser
import ProxyCore

/// `atsproxy passthrough --list`: the hosts `run` tunnels without interception by default.
struct PassthroughCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "passthrough",
        abstract: "Show the hosts tunnelled without interception by default (Apple's own services).",
        discussion: """
            `atsproxy run` tunnels these hosts untouched, with a line saying why: they are the device's own \
            services, which pin their certificates or fail when intercepted, not the app's traffic. \
            `run --intercept-apple-hosts` intercepts them like any other host; `run --passthrough HOST` adds more. \
            See docs/device.md.
            """)

    @Flag(name: .long, help: "List the built-in hosts with the service and the source of each (the default).")
    var list = false

    func run() throws {
        let entries = AppleHosts.builtIn.entries
        let width = entries.map { $0.pattern.description.count }.max() ?? 0
        print("Tunnelled without interception unless run --intercept-apple-hosts (\(entries.count) entries; "
            + ".domain covers the domain and every name below it):")
        for entry in entries {
            let name = entry.pattern.description
            print("  \(name)\(String(repeating: " ", count: width - name.count))  \(entry.service)")
            print("  \(String(repeating: " ", count: width))  source: \(entry.source)")
        }
    }
}
