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

    /// Deletes the namespace `name` and, when given, the host's end of its pair; says on stderr if it remains.
    static func remove(name: String, hostEnd: String?) {
        for arguments in [["netns", "delete", name]] + (hostEnd.map { [["link", "delete", $0]] } ?? []) {
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

/// Three network namespaces of the test's own, as a lab's devices reach the network through a Linux gateway:
/// a "device" whose default route is the "gateway", and an "origin" namespace behind the gateway holding three
/// addresses for test servers. Addresses from 198.18.0.0/15 (RFC 2544's benchmarking range, never routed): the
/// device side 198.18.x.y/30, the origin side 198.19.x.y/29. Needs root. `remove()` stops every process left in
/// them (by pid) and deletes them by name, which takes their veth pairs.
struct GatewayNamespaces {
    let device: String
    let gateway: String
    let origin: String
    /// The gateway's interface towards the device (what the nftables rule matches).
    let gatewayDeviceEnd: String
    let deviceAddress: String
    /// The gateway's address on the device's link (where a redirect delivers).
    let gatewayAddress: String
    /// The origin namespace's three addresses.
    let originAddresses: [String]

    init() throws {
        let tag = UInt32.random(in: 0..<(1 << 20))
        let prefix = "atsp-\(getpid())-\(tag)"
        device = "\(prefix)-dev"
        gateway = "\(prefix)-gw"
        origin = "\(prefix)-org"
        let deviceBase = Int(tag % 16_384) * 4, originBase = Int(tag % 8_192) * 8
        deviceAddress = "198.18.\(deviceBase / 256).\(deviceBase % 256 + 2)"
        gatewayAddress = "198.18.\(deviceBase / 256).\(deviceBase % 256 + 1)"
        let originGateway = "198.19.\(originBase / 256).\(originBase % 256 + 1)"
        originAddresses = (2...4).map { "198.19.\(originBase / 256).\(originBase % 256 + $0)" }
        gatewayDeviceEnd = "atsp\(tag)g"
        let deviceEnd = "atsp\(tag)d", gatewayOriginEnd = "atsp\(tag)w", originEnd = "atsp\(tag)o"
        var steps: [[String]] = [
            ["netns", "add", device], ["netns", "add", gateway], ["netns", "add", origin],
            ["link", "add", deviceEnd, "type", "veth", "peer", "name", gatewayDeviceEnd],
            ["link", "set", deviceEnd, "netns", device], ["link", "set", gatewayDeviceEnd, "netns", gateway],
            ["link", "add", gatewayOriginEnd, "type", "veth", "peer", "name", originEnd],
            ["link", "set", gatewayOriginEnd, "netns", gateway], ["link", "set", originEnd, "netns", origin],
            ["-n", device, "addr", "add", "\(deviceAddress)/30", "dev", deviceEnd],
            ["-n", gateway, "addr", "add", "\(gatewayAddress)/30", "dev", gatewayDeviceEnd],
            ["-n", gateway, "addr", "add", "\(originGateway)/29", "dev", gatewayOriginEnd],
        ]
        steps += originAddresses.map { ["-n", origin, "addr", "add", "\($0)/29", "dev", originEnd] }
        for (namespace, link) in [(device, deviceEnd), (gateway, gatewayDeviceEnd), (gateway, gatewayOriginEnd),
            (origin, originEnd), (device, "lo"), (gateway, "lo"), (origin, "lo")]
        {
            steps.append(["-n", namespace, "link", "set", link, "up"])
        }
        steps += [
            ["-n", device, "route", "add", "default", "via", gatewayAddress],
            ["-n", origin, "route", "add", "default", "via", originGateway],
            ["netns", "exec", gateway, "sysctl", "-qw", "net.ipv4.ip_forward=1"],
        ]
        do {
            for arguments in steps {
                let r = try runCommand("/bin/ip", arguments, limit: 20)
                guard r.status == 0 else {
                    throw HarnessError("ip \(arguments.joined(separator: " ")) failed (\(r.status)): \(r.stderrText)")
                }
            }
        } catch {
            Self.remove([device, gateway, origin])
            throw error
        }
    }

    /// The command line that runs `arguments` inside `namespace`.
    func exec(in namespace: String, _ arguments: [String]) -> (String, [String]) {
        ("/bin/ip", ["netns", "exec", namespace] + arguments)
    }

    func remove() { Self.remove([device, gateway, origin]) }

    private static func remove(_ names: [String]) {
        for name in names {
            // A process the test did not stop (it failed first) would keep nothing alive, but must not outlive it.
            do {
                let pids = try runCommand("/bin/ip", ["netns", "pids", name], limit: 20).stdoutText
                for pid in pids.split(separator: "\n").compactMap({ Int32($0) }) { kill(pid, SIGKILL) }
            } catch {
                FileHandle.standardError.write(Data("ip netns pids \(name): \(error)\n".utf8))
            }
        }
        for name in names { NetworkNamespace.remove(name: name, hostEnd: nil) }
    }
}
