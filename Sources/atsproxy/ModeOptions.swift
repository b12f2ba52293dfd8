import ArgumentParser
import ProxyEventLoop

/// `run --mode`: how clients reach the proxy (mitmproxy's option name). `regular`, the default, is the explicit
/// proxy on `--listen`; `transparent[:ADDR:PORT]` serves connections the devices' gateway redirects to it with an
/// nftables rule (docs/device.md), on its own address or on `--listen`'s when regular is not also asked for.
struct ModeOptions: ParsableArguments {
    @Option(
        name: .customLong("mode"),
        help: ArgumentHelp(
            "regular (the explicit HTTP/HTTPS proxy on --listen; the default) or transparent[:ADDR:PORT] (for a "
                + "Linux machine that is the devices' gateway: connections its nftables rule redirects to the proxy "
                + "keep their original destination; --print-nft prints the rule). Repeatable: regular and "
                + "transparent:ADDR:PORT serve both. wireguard[:ADDR:PORT] (UDP, default 0.0.0.0:51820): a device "
                + "joins with the WireGuard app from the QR code printed at start; this version completes the "
                + "handshake and answers ping, but does not carry TCP or UDP through the tunnel yet (the explicit "
                + "proxy runs beside it).",
            valueName: "MODE"))
    var modes: [String] = []

    @Option(
        name: .customLong("wireguard-devices"),
        help: ArgumentHelp(
            "With --mode wireguard: how many devices may join, each with its own key, tunnel address (198.19.0.2, "
                + ".3, ...) and configuration (device.conf, device-2.conf, ... beside the CA, also on the set-up "
                + "page); 1 to \(WireGuardKeyFiles.maxDevices) (default: 1). Keys are made on first use and kept.",
            valueName: "N"))
    var wireguardDevices: Int?

    @Flag(
        name: .customLong("print-nft"),
        help: ArgumentHelp(
            "With --mode transparent: print the nftables ruleset that redirects the devices' TCP 80 and 443 to the "
                + "proxy, and their UDP 443 to the proxy's UDP socket that refuses and counts QUIC (apps fall back "
                + "to TCP), and exit. Load it with `nft -f` as root."))
    var printNFT = false

    @Option(
        name: .customLong("devices-interface"),
        help: ArgumentHelp(
            "The gateway's interface the devices are on, for --print-nft (default: wlan0).", valueName: "NAME"))
    var devicesInterface: String = "wlan0"

    /// Where each mode listens, checked: `listen` is `--listen`'s address.
    func listeners(listen: (String, UInt16)) throws -> ProxyListeners {
        var regular = false
        var transparent: (String, UInt16)?
        var transparentOnListen = false
        var wireguard: (String, UInt16)?
        for mode in modes {
            let (name, rest) = mode.firstIndex(of: ":").map { (mode[..<$0], mode[mode.index(after: $0)...]) }
                ?? (Substring(mode), nil)
            switch name {
            case "regular" where rest == nil:
                guard !regular else { throw ValidationError("--mode regular is given twice") }
                regular = true
            case "regular":
                throw ValidationError("--mode regular takes no address: it listens on --listen")
            case "transparent":
                guard transparent == nil else { throw ValidationError("--mode transparent is given twice") }
                if let rest {
                    do { transparent = try RunCommand.parseListen(String(rest)) } catch let error as ValidationError {
                        throw ValidationError(error.message
                            .replacingOccurrences(of: "--listen '", with: "--mode 'transparent:")
                            .replacingOccurrences(of: "--listen expects", with: "--mode transparent:ADDR:PORT expects"))
                    }
                } else {
                    transparent = listen
                    transparentOnListen = true
                }
            case "wireguard":
                guard wireguard == nil else { throw ValidationError("--mode wireguard is given twice") }
                guard let rest else {
                    wireguard = ("0.0.0.0", WireGuardListening.defaultPort)
                    continue
                }
                do { wireguard = try RunCommand.parseListen(String(rest)) } catch let error as ValidationError {
                    throw ValidationError(error.message
                        .replacingOccurrences(of: "--listen '", with: "--mode 'wireguard:")
                        .replacingOccurrences(of: "--listen expects", with: "--mode wireguard:ADDR:PORT expects"))
                }
            default:
                throw ValidationError(
                    "--mode '\(mode)': expected regular, transparent[:ADDR:PORT] or wireguard[:ADDR:PORT]")
            }
        }
        if transparentOnListen && regular {
            throw ValidationError(
                "--mode regular and --mode transparent cannot share --listen's port: give transparent its own, "
                    + "e.g. --mode transparent:0.0.0.0:8081")
        }
        if printNFT && transparent == nil {
            throw ValidationError("--print-nft goes with --mode transparent (it redirects to the transparent port)")
        }
        if printNFT, let transparent, transparent.1 == 0 {
            throw ValidationError(
                "--print-nft needs the transparent port: 0 is chosen at start; give one (transparent:0.0.0.0:8443)")
        }
        if let wireguardDevices {
            guard wireguard != nil else {
                throw ValidationError("--wireguard-devices goes with --mode wireguard")
            }
            guard (1...WireGuardKeyFiles.maxDevices).contains(wireguardDevices) else {
                throw ValidationError(
                    "--wireguard-devices \(wireguardDevices): expected 1 to \(WireGuardKeyFiles.maxDevices) (the "
                        + "devices' tunnel addresses 198.19.0.2 to 198.19.0.\(WireGuardKeyFiles.maxDevices + 1))")
            }
        }
        guard NFTRuleset.isInterfaceName(devicesInterface) else {
            throw ValidationError(
                "--devices-interface '\(devicesInterface)' is no interface name (1 to 15 letters, digits, '.', '-', "
                    + "'_')")
        }
        return ProxyListeners(
            regular: regular || transparent == nil ? listen : nil, transparent: transparent, wireguard: wireguard,
            wireguardDevices: wireguardDevices ?? 1)
    }
}

/// Where the proxy listens, by mode.
struct ProxyListeners {
    /// The explicit proxy's address (`--listen`), nil when only transparent mode runs.
    var regular: (String, UInt16)?
    /// The transparent listener's address, nil without `--mode transparent`.
    var transparent: (String, UInt16)?
    /// The WireGuard UDP socket's address, nil without `--mode wireguard`. It does not replace the explicit proxy:
    /// TCP through the tunnel is not built yet.
    var wireguard: (String, UInt16)? = nil
    /// `--wireguard-devices`: how many devices WireGuard mode makes keys and configurations for (1 … 250).
    var wireguardDevices = 1
}

/// The nftables ruleset of transparent mode: a table of its own, so loading it again replaces it and deleting it
/// removes everything it added.
enum NFTRuleset {
    static let table = "atsproxy"

    /// The ruleset that sends the devices on `interface` to the proxy's transparent `port`: TCP 80 and 443 to its
    /// listener; UDP 443 (QUIC, HTTP/3) to its UDP socket on the same port, which refuses each attempt at once
    /// (QUICRefusal) and counts it, so the app falls back to TCP (as URLSession does) and is seen. Should the proxy
    /// not run, the kernel refuses the datagrams itself (ICMP port unreachable: nothing listens there).
    static func text(interface: String, port: UInt16) -> String {
        """
        # atsproxy transparent mode: devices on \(interface) are sent to the proxy's port \(port).
        # Load: sudo nft -f FILE (root or CAP_NET_ADMIN; the proxy itself runs unprivileged).
        # Remove: sudo nft delete table inet \(table)
        table inet \(table)
        delete table inet \(table)
        table inet \(table) {
        \tchain prerouting {
        \t\ttype nat hook prerouting priority dstnat; policy accept;
        \t\tiifname "\(interface)" tcp dport { 80, 443 } redirect to :\(port)
        \t\tiifname "\(interface)" udp dport 443 redirect to :\(port)
        \t}
        }

        """
    }

    /// What nftables takes as an interface name in a rule (Linux allows 15 bytes; quotes and spaces would break
    /// the rule).
    static func isInterfaceName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 15
            && name.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E
                    || c == 0x2D || c == 0x5F
            }
    }
}
