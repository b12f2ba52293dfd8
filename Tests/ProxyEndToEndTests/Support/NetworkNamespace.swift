import Foundation
import TestSupport

/// A network namespace of the test's own, joined to the host by a veth pair with addresses from 198.18.0.0/15
/// (RFC 2544's benchmarking range, never routed): a client in it reaches the proxy on a non-loopback address, as a
/// phone on the LAN does. Needs root (the tests run as root in CI). `remove()` deletes it by name, with the pair.
struct NetworkNamespace {
    let name: String
    /// The host's end (where the proxy listens) and the namespace's end.
    let hostAddress: String
    let clientAddress: String

    init() throws {
        let tag = UInt32.random(in: 0..<(1 << 20))
        name = "atsp-\(getpid())-\(tag)"
        // A /30 of its own: 198.18.x.y with y a multiple of 4, chosen at random.
        let base = Int(tag % 16_384) * 4
        hostAddress = "198.18.\(base / 256).\(base % 256 + 1)"
        clientAddress = "198.18.\(base / 256).\(base % 256 + 2)"
        let hostEnd = "atsp\(tag)h", inner = "atsp\(tag)n"
        do {
            for arguments in [
                ["netns", "add", name],
                ["link", "add", hostEnd, "type", "veth", "peer", "name", inner],
                ["link", "set", inner, "netns", name],
                ["addr", "add", "\(hostAddress)/30", "dev", hostEnd],
                ["link", "set", hostEnd, "up"],
                ["netns", "exec", name, "ip", "addr", "add", "\(clientAddress)/30", "dev", inner],
                ["netns", "exec", name, "ip", "link", "set", inner, "up"],
                ["netns", "exec", name, "ip", "link", "set", "lo", "up"],
            ] {
                let r = try runCommand("/bin/ip", arguments, limit: 20)
                guard r.status == 0 else {
                    throw HarnessError("ip \(arguments.joined(separator: " ")) failed (\(r.status)): \(r.stderrText)")
                }
            }
        } catch {
            Self.remove(name: name, hostEnd: hostEnd)
            throw error
        }
        self.hostEnd = hostEnd
    }

    private let hostEnd: String

    /// The command line that runs `arguments` inside the namespace.
    func exec(_ arguments: [String]) -> (String, [String]) {
        ("/bin/ip", ["netns", "exec", name] + arguments)
    }

    /// Deletes the namespace (which takes its end of the pair, and so the pair) and, should it remain, the host's end.
    func remove() { Self.remove(name: name, hostEnd: hostEnd) }

    private static func remove(name: String, hostEnd: String) {
        for arguments in [["netns", "delete", name], ["link", "delete", hostEnd]] {
            // Either may be gone already (a half-made namespace, or the pair went with the namespace): what matters
            // is that neither is left, which the check below makes sure of.
            do { _ = try runCommand("/bin/ip", arguments, limit: 20) } catch {
                FileHandle.standardError.write(Data("ip \(arguments.joined(separator: " ")): \(error)\n".utf8))
            }
        }
        do {
            let left = try runCommand("/bin/ip", ["netns", "list"], limit: 20).stdoutText
            if left.split(separator: "\n").contains(where: { $0.split(separator: " ").first.map(String.init) == name }) {
                FileHandle.standardError.write(Data("network namespace \(name) could not be removed\n".utf8))
            }
        } catch {
            FileHandle.standardError.write(Data("ip netns list: \(error)\n".utf8))
        }
    }
}
