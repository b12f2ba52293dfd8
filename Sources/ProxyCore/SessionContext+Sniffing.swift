import TLSCore

// Theory of operation: after a CONNECT was answered 200 (or a transparent connection started: HTTP is told apart too,
// and SNI decides passthrough; see SessionContext+Transparent), the client's first bytes say what it speaks. The phase
// `sniffing(host:port:buffer:)` holds them (its whole state: no layer object is needed).
//
// - Too few bytes to tell: wait for more (the ClientHello must come within `--client-timeout`).
// - Not TLS: relayed untouched as a raw tunnel (TunnelLayer), with a notice; for the set-up site's name, which has
//   no upstream, answered and closed instead (SessionContext+LocalSite).
// - A whole TLS ClientHello: interception starts (InterceptLayer) with the hello's bytes held for the client's leg.
// - A ClientHello that cannot be read: closed, with a notice folded by kind.

extension SessionContext {
    /// Client bytes while sniffing.
    func sniffBytes(_ bytes: [UInt8]) {
        guard case .sniffing(let host, let port, var buffer) = phase else { return }
        // Out of `phase` first, so the bytes are appended in place: a hello trickling in a byte at a time would
        // otherwise copy everything so far on every read.
        phase = .done
        buffer += bytes
        sniff(host: host, port: port, buffer: buffer)
    }

    /// Decides what `buffer`, the client's first bytes after the CONNECT to `host:port`, is; sets the phase.
    func sniff(host: String, port: Int, buffer: [UInt8]) {
        guard !buffer.isEmpty, let isTLS = ClientHelloParser.looksLikeTLS(buffer) else {
            phase = .sniffing(host: host, port: port, buffer: buffer)
            return
        }
        guard isTLS else {
            if injected != nil {
                injectWithoutTLS(host: host, port: port)
                return
            }
            if transparentDestination != nil {
                if sniffTransparentCleartext(host: host, port: port, buffer: buffer) { return }
                notice("\(host):\(port): the client speaks neither TLS nor HTTP; relaying the bytes as a plain tunnel",
                    kind: "transparent tunnel")
                let record = Tunnel(
                    host: host, port: port, note: "tunnel: the client speaks neither TLS nor HTTP", started: now(),
                    clientSpeaksTLS: false)
                startTunnel(record, pending: buffer, established: nil)
                return
            }
            if refuseLocalSiteTunnel(host: host) { return }
            notice("\(host):\(port): the client does not speak TLS inside CONNECT; relaying the bytes as a plain tunnel")
            let record = Tunnel(
                host: host, port: port, note: "tunnel: the client does not speak TLS", started: now(),
                clientSpeaksTLS: false)
            startTunnel(record, pending: buffer, established: nil)
            return
        }
        do {
            guard let hello = try ClientHelloParser.parse(buffer) else {
                phase = .sniffing(host: host, port: port, buffer: buffer)
                return
            }
            if env.rules != nil, injectAtClientHello(connectHost: host, port: port, hello: hello, helloBytes: buffer) {
                return
            }
            if transparentDestination != nil,
                tunnelTransparentHello(hello, bytes: buffer, destination: host, port: port)
            {
                return
            }
            startInterception(connectHost: host, port: port, hello: hello, helloBytes: buffer)
        } catch {
            notice("\(host):\(port): unreadable TLS ClientHello from the client (\(error)); closing",
                kind: "unreadable ClientHello")
            closeAll()
        }
    }

    /// The ClientHello did not come in time after the CONNECT's 200 (`--client-timeout`).
    func clientHelloDeadlinePassed() {
        guard case .sniffing(let host, let port, let buffer) = phase else { return }
        if transparentDestination != nil, buffer.isEmpty {
            tunnelSilentTransparentClient(host: host, port: port)
            return
        }
        let got = buffer.isEmpty ? "nothing" : "\(buffer.count) bytes of it"
        notice("\(host):\(port): no TLS ClientHello from the client within \(env.timeouts.client) of the CONNECT "
            + "(got \(got)); closing (--client-timeout)")
        closeAll()
    }
}
