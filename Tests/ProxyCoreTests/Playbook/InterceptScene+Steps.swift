import ATSPolicy

@testable import ProxyCore

extension Playbook {
    /// The steps every intercepted connection starts with: the CONNECT is answered in the clear, and the client's
    /// ClientHello makes the session connect to the mapped origin and send it the iOS-like ClientHello.
    /// With `--diagnostics`, the trace records between are taken as they come (`Expect.anyLogs`).
    func connects(_ scene: InterceptScene) {
        let traced = env.diagnosticsLevel > 0
        self >> .clientBytes(scene.connect)
        self << .startTimer(.requestHead)
        self << .sendToClient("HTTP/1.1 200 Connection established\r\n\r\n")
        self << .startTimer(.clientHello)
        self >> .clientFlight
        if traced { self << .anyLogs }
        self << .connectUpstream(address: "127.0.0.1", port: 9443)
        self >> .upstreamConnected
        if traced { self << .anyLogs }
        self << .startTimer(.upstreamHandshake)
        self << .sendToUpstream(.tlsRecords)
    }

    /// After `connects`, with an origin the policy allows: both handshakes complete (the origin's first, then the
    /// client's, answered with the minted leaf), and the client may send its request.
    func completesHandshakes() {
        self >> .originFlight
        self << .sendToUpstream(.tlsRecords)
        self << .startTimer(.clientHandshake)
        self << .sendToClient(.tlsRecords)
        self >> .clientFlight
        self << .sendToClient(.tlsRecords)
    }

    /// A TLS 1.0-only origin refuses the iOS-like ClientHello; the session's permissive probe (a second
    /// connection) then completes a TLS 1.0 handshake with it, which is judged.
    func probesTLS10Origin() {
        let traced = env.diagnosticsLevel > 0
        self >> .originFlight
        self << .closeUpstream
        if traced { self << .anyLogs }
        self << .connectUpstream(address: "127.0.0.1", port: 9443)
        self >> .upstreamConnected
        if traced { self << .anyLogs }
        self << .startTimer(.upstreamHandshake)
        self << .sendToUpstream(.tlsRecords)
        self >> .originFlight
        self << .sendToUpstream(.tlsRecords)
    }
}
