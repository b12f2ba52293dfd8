import Testing

@testable import WireGuardCore

/// A playbook for `TunnelTCP` (mitmproxy's idea, see docs/../shared/house-style.md): the test feeds segments from the
/// device (built with `TCPSegment`, sent through `TunnelIPLayer` as the tunnel does) and calls from the session, and
/// states the transcript that must come out. Every packet out is decoded back (`TunnelPacket.parse` and
/// `TCPSegment.parse`, both checksums checked) and written as one line; the lines since the last `expect` are
/// compared with the expected ones, and a mismatch is recorded as a line diff.
///
/// Lines: `← …` a segment from the device, `→ …` a packet to it, `• …` an event, and the calls (`send 100 bytes`,
/// `finish`, `abort`, `pause`, `resume`, `tick at 1.000s`). A segment reads `FLAGS seq=… ack=… win=… [mss=…]
/// [len=…]` (ack only with ACK). A flow other than the default one (device port 49152 to 93.184.216.34:443) adds
/// ` (:PORT)`. The device's ISN is 500 and ours 1000 unless a test says otherwise.
struct TCPPlaybook {
    static let proxy: [UInt8] = [198, 19, 0, 1]
    static let device: [UInt8] = [198, 19, 0, 2]
    static let server: [UInt8] = [93, 184, 216, 34]
    static let port: UInt16 = 49152

    var tcp: TunnelTCP
    /// Monotonic nanoseconds.
    var now: UInt64 = 0
    let initialSequence: UInt32
    private var lines: [String] = []
    /// The bytes given to `send` on each flow (by device port), to check every data segment carries the right ones.
    private var given: [UInt16: [UInt8]] = [:]

    init(limits: TunnelTCP.Limits = TunnelTCP.Limits(), initialSequence: UInt32 = 1000) {
        self.initialSequence = initialSequence
        tcp = TunnelTCP(limits: limits, initialSequence: { initialSequence })
    }

    static func flow(_ port: UInt16 = TCPPlaybook.port) -> TunnelTCP.FlowID {
        TunnelTCP.FlowID(device: TunnelTCP.value(device), devicePort: port, destination: TunnelTCP.value(server),
            destinationPort: 443)
    }

    // MARK: Inputs

    /// A segment from the device, through the IP layer.
    mutating func device(
        _ flags: TCPSegment.Flags, seq: UInt32, ack: UInt32 = 0, win: UInt16 = 65535, mss: UInt16? = nil,
        data: [UInt8] = [], port: UInt16 = TCPPlaybook.port
    ) {
        let segment = TCPSegment(
            sourcePort: port, destinationPort: 443, sequence: seq, acknowledgment: ack, flags: flags, window: win,
            maximumSegmentSize: mss, payload: data[...])
        lines.append("← " + Self.describe(segment) + Self.suffix(port))
        let packet = segment.packet(from: Self.device, to: Self.server, identification: 1)
        guard case .tcp(let parsed, let source, let destination) = TunnelIPLayer(address: Self.proxy).handle(packet)
        else {
            lines.append("! the IP layer did not hand the segment up")
            return
        }
        record(tcp.receive(parsed, source: source, destination: destination, now: now))
    }

    /// A segment from the device carrying `count` bytes of text ("abcd…").
    mutating func device(
        _ flags: TCPSegment.Flags, seq: UInt32, ack: UInt32 = 0, win: UInt16 = 65535, bytes count: Int,
        port: UInt16 = TCPPlaybook.port
    ) {
        device(flags, seq: seq, ack: ack, win: win, data: Self.text(count), port: port)
    }

    /// The three-way handshake on `port`, checked: SYN, our SYN-ACK, the device's ACK, `opened`.
    mutating func handshake(
        win: UInt16 = 65535, mss: UInt16? = 1460, port: UInt16 = TCPPlaybook.port, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let iss = initialSequence
        device(.syn, seq: 500, win: win, mss: mss, port: port)
        device(.ack, seq: 501, ack: iss &+ 1, win: win, port: port)
        let ours = tcp.limits.maximumSegmentSize
        let window = tcp.limits.receiveWindow
        let p = Self.suffix(port)
        expect(
            """
            ← SYN seq=500 win=\(win)\(mss.map { " mss=\($0)" } ?? "")\(p)
            → SYN|ACK seq=\(iss) ack=501 win=\(window) mss=\(ours)\(p)
            ← ACK seq=501 ack=\(iss &+ 1) win=\(win)\(p)
            • opened\(p)
            """, sourceLocation: sourceLocation)
    }

    /// The session sends `count` bytes (a counting pattern, so retransmissions can be checked byte for byte).
    mutating func send(_ count: Int, port: UInt16 = TCPPlaybook.port) {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: given[port, default: []].count + $0) }
        given[port, default: []] += bytes
        lines.append("send \(count) bytes" + Self.suffix(port))
        record(tcp.send(bytes, on: Self.flow(port), now: now))
    }

    mutating func finish(port: UInt16 = TCPPlaybook.port) {
        lines.append("finish" + Self.suffix(port))
        record(tcp.finish(Self.flow(port), now: now))
    }

    mutating func abort(port: UInt16 = TCPPlaybook.port) {
        lines.append("abort" + Self.suffix(port))
        record(tcp.abort(Self.flow(port)))
    }

    mutating func pause(_ paused: Bool, port: UInt16 = TCPPlaybook.port) {
        lines.append((paused ? "pause" : "resume") + Self.suffix(port))
        record(tcp.setReceivePaused(paused, on: Self.flow(port)))
    }

    /// Moves the clock to `seconds` (no line: the next input happens then).
    mutating func at(_ seconds: Double) { now = UInt64(seconds * 1e9) }

    /// Moves the clock to the stack's next deadline and ticks.
    mutating func tickAtDeadline(sourceLocation: SourceLocation = #_sourceLocation) {
        guard let deadline = tcp.nextDeadline else {
            Issue.record("no deadline to tick at", sourceLocation: sourceLocation)
            return
        }
        tick(at: deadline)
    }

    mutating func tick(at time: UInt64) {
        now = time
        lines.append("tick at \(Self.seconds(time))")
        record(tcp.tick(now: now))
    }

    /// The next deadline as `1.000s`, or "none".
    var deadline: String { tcp.nextDeadline.map(Self.seconds) ?? "none" }

    // MARK: The transcript

    /// Compares the lines since the last call with `expected` (one per line; surrounding blanks ignored).
    mutating func expect(_ expected: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let want = expected.split(separator: "\n").map { $0.trimmingWhitespace }.filter { !$0.isEmpty }
        let got = lines
        lines = []
        guard want != got else { return }
        Issue.record(
            Comment(rawValue: "the transcript differs (- expected, + actual):\n" + Self.diff(want, got)),
            sourceLocation: sourceLocation)
    }

    private mutating func record(_ output: TunnelTCP.Output) {
        for packet in output.packets { lines.append(decode(packet)) }
        for event in output.events { lines.append(Self.describe(event)) }
    }

    /// One packet to the device, as a line; anything wrong with it is said in the line.
    private func decode(_ packet: [UInt8]) -> String {
        guard case .success(.ipv4(let header, let payload)) = TunnelPacket.parse(packet) else {
            return "→ ! not an IPv4 packet: \(TunnelPacket.parse(packet))"
        }
        guard header.protocolNumber == TunnelPacket.tcp, payload.endIndex == packet.endIndex else {
            return "→ ! protocol \(header.protocolNumber), \(packet.count - payload.endIndex) bytes after the packet"
        }
        guard case .success(let segment) = TCPSegment.parse(payload, source: header.source,
            destination: header.destination)
        else { return "→ ! bad TCP segment: \(TCPSegment.parse(payload, source: header.source, destination: header.destination))" }
        var line = "→ " + Self.describe(segment) + Self.suffix(segment.destinationPort)
        if header.source != Self.server || header.destination != Self.device || segment.sourcePort != 443 {
            line += " ! from \(ipv4Text(header.source)):\(segment.sourcePort) to \(ipv4Text(header.destination))"
        }
        if !segment.payload.isEmpty {
            // Our bytes start at ISS + 1: each data segment must carry exactly the bytes given at its offset.
            let offset = Int(segment.sequence &- (initialSequence &+ 1))
            let sent = given[segment.destinationPort, default: []]
            if offset < 0 || offset + segment.payload.count > sent.count
                || Array(sent[offset..<(offset + segment.payload.count)]) != Array(segment.payload)
            {
                line += " ! wrong bytes"
            }
        }
        return line
    }

    static func describe(_ segment: TCPSegment) -> String {
        let names: [(TCPSegment.Flags, String)] = [(.syn, "SYN"), (.fin, "FIN"), (.rst, "RST"), (.psh, "PSH"), (.ack, "ACK")]
        var text = names.filter { segment.flags.contains($0.0) }.map(\.1).joined(separator: "|")
        if text.isEmpty { text = "none" }
        text += " seq=\(segment.sequence)"
        if segment.flags.contains(.ack) { text += " ack=\(segment.acknowledgment)" }
        text += " win=\(segment.window)"
        if let mss = segment.maximumSegmentSize { text += " mss=\(mss)" }
        if !segment.payload.isEmpty { text += " len=\(segment.payload.count)" }
        return text
    }

    static func describe(_ event: TunnelTCP.Event) -> String {
        func name(_ id: TunnelTCP.FlowID) -> String {
            id.device == flow().device && id.destination == flow().destination && id.destinationPort == 443
                ? suffix(id.devicePort) : " (\(id))"
        }
        switch event {
        case .opened(let id): return "• opened" + name(id)
        case .data(let id, let bytes):
            let printable = bytes.count <= 32 && bytes.allSatisfy { (0x20..<0x7F).contains($0) }
            return "• data " + (printable ? "\"\(String(decoding: bytes, as: UTF8.self))\"" : "len=\(bytes.count)")
                + (bytes == text(bytes.count) || printable ? "" : " ! not the device's bytes") + name(id)
        case .finished(let id): return "• finished" + name(id)
        case .reset(let id): return "• reset" + name(id)
        case .closed(let id): return "• closed" + name(id)
        case .writable(let id): return "• writable" + name(id)
        }
    }

    static func suffix(_ port: UInt16) -> String { port == Self.port ? "" : " (:\(port))" }

    static func seconds(_ nanoseconds: UInt64) -> String {
        let milliseconds = nanoseconds / 1_000_000
        let fraction = String(milliseconds % 1000)
        return "\(milliseconds / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction + "s"
    }

    /// `count` bytes of text, "abcd…z" over and over (the device's data).
    static func text(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(ascii: "a") + UInt8($0 % 26) } }

    /// A line diff (longest common subsequence): "  " both, "- " expected only, "+ " actual only.
    static func diff(_ a: [String], _ b: [String]) -> String {
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in stride(from: a.count - 1, through: 0, by: -1) {
            for j in stride(from: b.count - 1, through: 0, by: -1) {
                table[i][j] = a[i] == b[j] ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
            }
        }
        var out: [String] = []
        var (i, j) = (0, 0)
        while i < a.count || j < b.count {
            if i < a.count, j < b.count, a[i] == b[j] {
                out.append("  " + a[i])
                i += 1
                j += 1
            } else if i < a.count, j == b.count || table[i + 1][j] >= table[i][j + 1] {
                out.append("- " + a[i])
                i += 1
            } else {
                out.append("+ " + b[j])
                j += 1
            }
        }
        return out.joined(separator: "\n")
    }
}

extension Substring {
    fileprivate var trimmingWhitespace: String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}

@Suite("TunnelTCP playbooks")
struct TunnelTCPPlaybooks {
    // MARK: Handshake

    @Test("The handshake: SYN answered with SYN-ACK (our MSS), the device's ACK opens the flow")
    func handshake() {
        var p = TCPPlaybook()
        p.device(.syn, seq: 500, mss: 1460)
        p.expect("""
            ← SYN seq=500 win=65535 mss=1460
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            """)
        #expect(p.tcp.flowCount == 1 && p.deadline == "1.000s")
        p.device(.ack, seq: 501, ack: 1001)
        p.expect("""
            ← ACK seq=501 ack=1001 win=65535
            • opened
            """)
        #expect(p.tcp.flowCount == 1 && p.deadline == "none")
    }

    @Test("A SYN retransmitted in SYN-RECEIVED gets the same SYN-ACK; the SYN-ACK is resent on its timer")
    func synRetransmitted() {
        var p = TCPPlaybook()
        p.device(.syn, seq: 500, mss: 1460)
        p.device(.syn, seq: 500, mss: 1460)
        p.tickAtDeadline()
        p.expect("""
            ← SYN seq=500 win=65535 mss=1460
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            ← SYN seq=500 win=65535 mss=1460
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            tick at 1.000s
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            """)
        #expect(p.deadline == "3.000s")
        p.device(.ack, seq: 501, ack: 1001)
        p.expect("""
            ← ACK seq=501 ack=1001 win=65535
            • opened
            """)
    }

    @Test("A device that never completes the handshake is forgotten after 8 SYN-ACK retransmissions, with no event")
    func synReceivedGivesUp() {
        var p = TCPPlaybook()
        p.device(.syn, seq: 500, mss: 1460)
        for _ in 0..<8 { p.tickAtDeadline() }
        p.expect("""
            ← SYN seq=500 win=65535 mss=1460
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            tick at 1.000s
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            tick at 3.000s
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            tick at 7.000s
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            tick at 15.000s
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            tick at 31.000s
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            tick at 61.000s
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            tick at 91.000s
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            tick at 121.000s
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            """)
        p.tickAtDeadline()
        p.expect("""
            tick at 151.000s
            → RST|ACK seq=1000 ack=501 win=0
            """)
        #expect(p.tcp.flowCount == 0 && p.deadline == "none")
    }

    @Test("The handshake's ACK must acknowledge our SYN: another is answered with RST and the flow waits on")
    func badHandshakeAck() {
        var p = TCPPlaybook()
        p.device(.syn, seq: 500, mss: 1460)
        p.device(.ack, seq: 501, ack: 7777)
        p.device(.ack, seq: 501, ack: 1001)
        p.expect("""
            ← SYN seq=500 win=65535 mss=1460
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380
            ← ACK seq=501 ack=7777 win=65535
            → RST seq=7777 win=0
            ← ACK seq=501 ack=1001 win=65535
            • opened
            """)
    }

    // MARK: Receiving

    @Test("Data in order is handed up and acknowledged at once")
    func dataInOrder() {
        var p = TCPPlaybook()
        p.handshake()
        p.device([.psh, .ack], seq: 501, ack: 1001, data: Array("hello".utf8))
        p.device([.psh, .ack], seq: 506, ack: 1001, data: Array(" world".utf8))
        p.expect("""
            ← PSH|ACK seq=501 ack=1001 win=65535 len=5
            → ACK seq=1001 ack=506 win=65535
            • data "hello"
            ← PSH|ACK seq=506 ack=1001 win=65535 len=6
            → ACK seq=1001 ack=512 win=65535
            • data " world"
            """)
    }

    @Test("A segment from the future is dropped with a duplicate ACK; the gap filled, the device resends it")
    func outOfOrder() {
        var p = TCPPlaybook()
        p.handshake()
        p.device([.psh, .ack], seq: 506, ack: 1001, data: Array("world".utf8))
        p.device([.psh, .ack], seq: 506, ack: 1001, data: Array("world".utf8))
        p.device(.ack, seq: 501, ack: 1001, data: Array("hello".utf8))
        p.device([.psh, .ack], seq: 506, ack: 1001, data: Array("world".utf8))
        p.expect("""
            ← PSH|ACK seq=506 ack=1001 win=65535 len=5
            → ACK seq=1001 ack=501 win=65535
            ← PSH|ACK seq=506 ack=1001 win=65535 len=5
            → ACK seq=1001 ack=501 win=65535
            ← ACK seq=501 ack=1001 win=65535 len=5
            → ACK seq=1001 ack=506 win=65535
            • data "hello"
            ← PSH|ACK seq=506 ack=1001 win=65535 len=5
            → ACK seq=1001 ack=511 win=65535
            • data "world"
            """)
    }

    @Test("A retransmission overlapping what was taken is trimmed; one wholly old is only acknowledged")
    func overlappingRetransmit() {
        var p = TCPPlaybook()
        p.handshake()
        p.device(.ack, seq: 501, ack: 1001, data: Array("hello".utf8))
        p.device(.ack, seq: 501, ack: 1001, data: Array("helloworld".utf8))
        p.device(.ack, seq: 503, ack: 1001, data: Array("llo".utf8))
        p.device([.fin, .ack], seq: 506, ack: 1001, data: Array("world".utf8))
        p.expect("""
            ← ACK seq=501 ack=1001 win=65535 len=5
            → ACK seq=1001 ack=506 win=65535
            • data "hello"
            ← ACK seq=501 ack=1001 win=65535 len=10
            → ACK seq=1001 ack=511 win=65535
            • data "world"
            ← ACK seq=503 ack=1001 win=65535 len=3
            → ACK seq=1001 ack=511 win=65535
            ← FIN|ACK seq=506 ack=1001 win=65535 len=5
            → ACK seq=1001 ack=512 win=65535
            • finished
            """)
    }

    @Test("Paused: window 0 advertised, bytes up to the edge already advertised taken and none beyond; resume updates")
    func receivePaused() {
        var limits = TunnelTCP.Limits()
        limits.receiveWindow = 1000
        var p = TCPPlaybook(limits: limits)
        p.device(.syn, seq: 500, mss: 1460)
        p.device(.ack, seq: 501, ack: 1001)
        p.pause(true)
        p.device(.ack, seq: 501, ack: 1001, bytes: 600)
        p.device(.ack, seq: 1101, ack: 1001, bytes: 600)
        p.device(.ack, seq: 1501, ack: 1001, bytes: 100)
        p.pause(false)
        p.device(.ack, seq: 1501, ack: 1001, bytes: 200)
        p.expect("""
            ← SYN seq=500 win=65535 mss=1460
            → SYN|ACK seq=1000 ack=501 win=1000 mss=1380
            ← ACK seq=501 ack=1001 win=65535
            • opened
            pause
            ← ACK seq=501 ack=1001 win=65535 len=600
            → ACK seq=1001 ack=1101 win=0
            • data len=600
            ← ACK seq=1101 ack=1001 win=65535 len=600
            → ACK seq=1001 ack=1501 win=0
            • data len=400
            ← ACK seq=1501 ack=1001 win=65535 len=100
            → ACK seq=1001 ack=1501 win=0
            resume
            → ACK seq=1001 ack=1501 win=1000
            ← ACK seq=1501 ack=1001 win=65535 len=200
            → ACK seq=1001 ack=1701 win=1000
            • data len=200
            """)
    }

    // MARK: Sending

    @Test("5,000 bytes into a window of 3,000: only 3,000 in flight until ACKs slide it, then the rest")
    func sendWithinWindow() {
        var p = TCPPlaybook()
        p.handshake(win: 3000)
        p.send(5000)
        p.device(.ack, seq: 501, ack: 2381, win: 3000)
        p.device(.ack, seq: 501, ack: 5381, win: 3000)
        p.device(.ack, seq: 501, ack: 6001, win: 3000)
        p.expect("""
            send 5000 bytes
            → ACK seq=1001 ack=501 win=65535 len=1380
            → ACK seq=2381 ack=501 win=65535 len=1380
            → ACK seq=3761 ack=501 win=65535 len=240
            ← ACK seq=501 ack=2381 win=3000
            → ACK seq=4001 ack=501 win=65535 len=1380
            ← ACK seq=501 ack=5381 win=3000
            → PSH|ACK seq=5381 ack=501 win=65535 len=620
            ← ACK seq=501 ack=6001 win=3000
            """)
        #expect(p.deadline == "none")
    }

    @Test("Segments are the device's MSS when below ours (536, and 536 when none offered), ours (1380) when above")
    func maximumSegmentSize() {
        var p = TCPPlaybook()
        p.handshake(mss: 536, port: 1)
        p.handshake(mss: 1460, port: 2)
        p.handshake(mss: nil, port: 3)
        p.send(1500, port: 1)
        p.send(1500, port: 2)
        p.send(1500, port: 3)
        p.expect("""
            send 1500 bytes (:1)
            → ACK seq=1001 ack=501 win=65535 len=536 (:1)
            → ACK seq=1537 ack=501 win=65535 len=536 (:1)
            → PSH|ACK seq=2073 ack=501 win=65535 len=428 (:1)
            send 1500 bytes (:2)
            → ACK seq=1001 ack=501 win=65535 len=1380 (:2)
            → PSH|ACK seq=2381 ack=501 win=65535 len=120 (:2)
            send 1500 bytes (:3)
            → ACK seq=1001 ack=501 win=65535 len=536 (:3)
            → ACK seq=1537 ack=501 win=65535 len=536 (:3)
            → PSH|ACK seq=2073 ack=501 win=65535 len=428 (:3)
            """)
    }

    @Test("A SYN offering MSS 0 does not hang the stack (it sent empty segments forever): segments have a floor of 48 bytes")
    func tinyMSS() {
        var p = TCPPlaybook()
        p.handshake(mss: 0)
        p.send(100)
        p.expect("""
            send 100 bytes
            → ACK seq=1001 ack=501 win=65535 len=48
            → ACK seq=1049 ack=501 win=65535 len=48
            → PSH|ACK seq=1097 ack=501 win=65535 len=4
            """)
    }

    @Test("RTO expiry resends one segment from SND.UNA, the timeout doubling each time")
    func retransmissionTimeout() {
        var p = TCPPlaybook()
        p.handshake()
        p.send(3000)
        p.at(0.1)
        p.device(.ack, seq: 501, ack: 2381)
        // RTT 100 ms: SRTT 100 ms, RTTVAR 50 ms, RTO 100 + 4 × 50 = 300 ms (RFC 6298 §2.2).
        #expect(p.deadline == "0.400s")
        p.tickAtDeadline()
        p.tickAtDeadline()
        p.tickAtDeadline()
        p.expect("""
            send 3000 bytes
            → ACK seq=1001 ack=501 win=65535 len=1380
            → ACK seq=2381 ack=501 win=65535 len=1380
            → PSH|ACK seq=3761 ack=501 win=65535 len=240
            ← ACK seq=501 ack=2381 win=65535
            tick at 0.400s
            → ACK seq=2381 ack=501 win=65535 len=1380
            tick at 1.000s
            → ACK seq=2381 ack=501 win=65535 len=1380
            tick at 2.200s
            → ACK seq=2381 ack=501 win=65535 len=1380
            """)
        #expect(p.deadline == "4.600s")
        // The device acknowledges the retransmission: the rest goes out again (go-back-N), the timer restarts.
        p.at(2.3)
        p.device(.ack, seq: 501, ack: 3761)
        p.expect("""
            ← ACK seq=501 ack=3761 win=65535
            → PSH|ACK seq=3761 ack=501 win=65535 len=240
            """)
        #expect(p.deadline == "4.700s")
    }

    @Test("An ACK for bytes sent before a timeout (the device's ACK was lost) is taken, not refused as unsent")
    func ackBeyondRetransmission() {
        var p = TCPPlaybook()
        p.handshake()
        p.send(3000)
        p.tickAtDeadline()
        p.device(.ack, seq: 501, ack: 4001)
        p.expect("""
            send 3000 bytes
            → ACK seq=1001 ack=501 win=65535 len=1380
            → ACK seq=2381 ack=501 win=65535 len=1380
            → PSH|ACK seq=3761 ack=501 win=65535 len=240
            tick at 1.000s
            → ACK seq=1001 ack=501 win=65535 len=1380
            ← ACK seq=501 ack=4001 win=65535
            """)
        #expect(p.deadline == "none")
        p.finish()
        p.tickAtDeadline()
        p.device(.ack, seq: 501, ack: 4002)
        p.expect("""
            finish
            → FIN|ACK seq=4001 ack=501 win=65535
            tick at 3.000s
            → FIN|ACK seq=4001 ack=501 win=65535
            ← ACK seq=501 ack=4002 win=65535
            """)
        #expect(p.deadline == "63.000s", "FIN-WAIT-2")
    }

    @Test("8 retransmissions unanswered: RST and reset")
    func retransmissionsExhausted() {
        var p = TCPPlaybook()
        p.handshake()
        p.send(100)
        for _ in 0..<9 { p.tickAtDeadline() }
        p.expect("""
            send 100 bytes
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            tick at 1.000s
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            tick at 3.000s
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            tick at 7.000s
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            tick at 15.000s
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            tick at 31.000s
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            tick at 61.000s
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            tick at 91.000s
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            tick at 121.000s
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            tick at 151.000s
            → RST|ACK seq=1101 ack=501 win=0
            • reset
            """)
        #expect(p.tcp.flowCount == 0 && p.deadline == "none")
    }

    @Test("Three duplicate ACKs resend the first unacknowledged segment at once (fast retransmit)")
    func fastRetransmit() {
        var p = TCPPlaybook()
        p.handshake()
        p.send(3000)
        p.device(.ack, seq: 501, ack: 2381)
        p.device(.ack, seq: 501, ack: 2381)
        p.device(.ack, seq: 501, ack: 2381)
        p.device(.ack, seq: 501, ack: 2381)
        p.device(.ack, seq: 501, ack: 4001)
        p.expect("""
            send 3000 bytes
            → ACK seq=1001 ack=501 win=65535 len=1380
            → ACK seq=2381 ack=501 win=65535 len=1380
            → PSH|ACK seq=3761 ack=501 win=65535 len=240
            ← ACK seq=501 ack=2381 win=65535
            ← ACK seq=501 ack=2381 win=65535
            ← ACK seq=501 ack=2381 win=65535
            ← ACK seq=501 ack=2381 win=65535
            → ACK seq=2381 ack=501 win=65535 len=1380
            ← ACK seq=501 ack=4001 win=65535
            """)
        #expect(p.deadline == "none")
    }

    @Test("Zero window: a 1-byte probe on the deadline, kept up as long as the device answers; opened, all is sent")
    func zeroWindowProbe() {
        var p = TCPPlaybook()
        p.handshake()
        p.device(.ack, seq: 501, ack: 1001, win: 0)
        p.send(100)
        p.tickAtDeadline()
        p.device(.ack, seq: 501, ack: 1001, win: 0)  // the device drops the probe's byte (Linux and BSD do)
        p.expect("""
            ← ACK seq=501 ack=1001 win=0
            send 100 bytes
            tick at 1.000s
            → ACK seq=1001 ack=501 win=65535 len=1
            ← ACK seq=501 ack=1001 win=0
            """)
        // RFC 1122 §4.2.2.17: as long as the device acknowledges the probes, the connection stays open.
        for _ in 0..<12 {
            p.tickAtDeadline()
            p.device(.ack, seq: 501, ack: 1001, win: 0)
        }
        var probes = 0
        var resets = 0
        p.expectLines { lines in
            probes = lines.filter { $0 == "→ ACK seq=1001 ack=501 win=65535 len=1" }.count
            resets = lines.filter { $0.contains("RST") || $0.contains("reset") }.count
        }
        #expect(probes == 12 && resets == 0 && p.tcp.flowCount == 1)
        p.device(.ack, seq: 501, ack: 1001, win: 65535)
        p.expect("""
            ← ACK seq=501 ack=1001 win=65535
            → PSH|ACK seq=1001 ack=501 win=65535 len=100
            """)
    }

    @Test("The session's FIN goes after its queued bytes, when the window lets them out")
    func finishAfterQueuedBytes() {
        var p = TCPPlaybook()
        p.handshake(win: 1000)
        p.send(1500)
        p.finish()
        p.device(.ack, seq: 501, ack: 2001, win: 1000)
        p.device(.ack, seq: 501, ack: 2502, win: 1000)
        p.expect("""
            send 1500 bytes
            → ACK seq=1001 ack=501 win=65535 len=1000
            finish
            ← ACK seq=501 ack=2001 win=1000
            → PSH|ACK seq=2001 ack=501 win=65535 len=500
            → FIN|ACK seq=2501 ack=501 win=65535
            ← ACK seq=501 ack=2502 win=1000
            """)
        p.send(10)  // nothing after FIN
        p.expect("send 10 bytes")
    }

    @Test("The device's FIN: finished and acknowledged; the session may still send, then its FIN; TIME-WAIT 2 s")
    func deviceFinishesFirst() {
        var p = TCPPlaybook()
        p.handshake()
        p.device([.fin, .ack], seq: 501, ack: 1001)
        p.send(5)
        p.finish()
        p.device(.ack, seq: 502, ack: 1007)
        p.expect("""
            ← FIN|ACK seq=501 ack=1001 win=65535
            → ACK seq=1001 ack=502 win=65535
            • finished
            send 5 bytes
            → PSH|ACK seq=1001 ack=502 win=65535 len=5
            finish
            → FIN|ACK seq=1006 ack=502 win=65535
            ← ACK seq=502 ack=1007 win=65535
            """)
        #expect(p.deadline == "2.000s")
        // A retransmitted FIN in TIME-WAIT is acknowledged again.
        p.at(1)
        p.device([.fin, .ack], seq: 501, ack: 1007)
        p.tickAtDeadline()
        p.expect("""
            ← FIN|ACK seq=501 ack=1007 win=65535
            → ACK seq=1007 ack=502 win=65535
            tick at 2.000s
            • closed
            """)
        #expect(p.tcp.flowCount == 0)
    }

    @Test("A new SYN on the port in TIME-WAIT closes the old flow (closed, so its session ends) and opens a new one")
    func timeWaitReuse() {
        var p = TCPPlaybook()
        p.handshake()
        p.device([.fin, .ack], seq: 501, ack: 1001)
        p.finish()
        p.device(.ack, seq: 502, ack: 1002)
        p.device(.syn, seq: 90000, mss: 1460)
        p.device(.ack, seq: 90001, ack: 1001)
        p.expect("""
            ← FIN|ACK seq=501 ack=1001 win=65535
            → ACK seq=1001 ack=502 win=65535
            • finished
            finish
            → FIN|ACK seq=1001 ack=502 win=65535
            ← ACK seq=502 ack=1002 win=65535
            ← SYN seq=90000 win=65535 mss=1460
            → SYN|ACK seq=1000 ack=90001 win=65535 mss=1380
            • closed
            ← ACK seq=90001 ack=1001 win=65535
            • opened
            """)
        #expect(p.tcp.flowCount == 1 && p.deadline == "none")
    }

    @Test("Both FINs, ours first: FIN-WAIT-2 until the device's FIN, then TIME-WAIT, closed after 2 s")
    func bothFinish() {
        var p = TCPPlaybook()
        p.handshake()
        p.finish()
        p.device(.ack, seq: 501, ack: 1002)
        #expect(p.deadline == "60.000s")
        p.at(5)
        p.device([.fin, .ack], seq: 501, ack: 1002)
        #expect(p.deadline == "7.000s")
        p.tickAtDeadline()
        p.expect("""
            finish
            → FIN|ACK seq=1001 ack=501 win=65535
            ← ACK seq=501 ack=1002 win=65535
            ← FIN|ACK seq=501 ack=1002 win=65535
            → ACK seq=1002 ack=502 win=65535
            • finished
            tick at 7.000s
            • closed
            """)
        #expect(p.tcp.flowCount == 0)
    }

    @Test("FIN-WAIT-2 is bounded: 60 s after the device's last byte without its FIN, RST and closed")
    func finWait2Bound() {
        var p = TCPPlaybook()
        p.handshake()
        p.finish()
        p.device(.ack, seq: 501, ack: 1002)
        p.at(30)
        p.device(.ack, seq: 501, ack: 1002, data: Array("late".utf8))  // half-close: the device may still send
        #expect(p.deadline == "90.000s")
        p.tickAtDeadline()
        p.expect("""
            finish
            → FIN|ACK seq=1001 ack=501 win=65535
            ← ACK seq=501 ack=1002 win=65535
            ← ACK seq=501 ack=1002 win=65535 len=4
            → ACK seq=1002 ack=505 win=65535
            • data "late"
            tick at 90.000s
            → RST|ACK seq=1002 ack=505 win=0
            • closed
            """)
        #expect(p.tcp.flowCount == 0)
    }

    @Test("abort: RST at once, no event, the flow forgotten")
    func abort() {
        var p = TCPPlaybook()
        p.handshake()
        p.send(10)
        p.abort()
        p.abort()
        p.expect("""
            send 10 bytes
            → PSH|ACK seq=1001 ack=501 win=65535 len=10
            abort
            → RST|ACK seq=1011 ack=501 win=0
            abort
            """)
        #expect(p.tcp.flowCount == 0 && p.deadline == "none")
    }

    // MARK: Resets and strangers

    @Test("A RST in the window ends the flow with reset; one outside it is ignored")
    func resetFromDevice() {
        var p = TCPPlaybook()
        p.handshake()
        p.device(.rst, seq: 501 &+ 70000)
        p.device(.rst, seq: 501 &- 1)
        #expect(p.tcp.flowCount == 1)
        p.device(.rst, seq: 600)
        p.expect("""
            ← RST seq=70501 win=65535
            ← RST seq=500 win=65535
            ← RST seq=600 win=65535
            • reset
            """)
        #expect(p.tcp.flowCount == 0 && p.deadline == "none")
    }

    @Test("A segment for no flow is answered with RST: seq from its ACK, or RST|ACK covering it; a RST is not")
    func unknownFlow() {
        var p = TCPPlaybook()
        p.device(.ack, seq: 600, ack: 2000)
        p.device(.psh, seq: 600, data: Array("hello".utf8))
        p.device(.fin, seq: 600)
        p.device([.syn, .ack], seq: 600, ack: 3000)
        p.device(.rst, seq: 600)
        p.expect("""
            ← ACK seq=600 ack=2000 win=65535
            → RST seq=2000 win=0
            ← PSH seq=600 win=65535 len=5
            → RST|ACK seq=0 ack=605 win=0
            ← FIN seq=600 win=65535
            → RST|ACK seq=0 ack=601 win=0
            ← SYN|ACK seq=600 ack=3000 win=65535
            → RST seq=3000 win=0
            ← RST seq=600 win=65535
            """)
        #expect(p.tcp.flowCount == 0)
    }

    @Test("At maximumFlows a new SYN is answered with RST; once a flow ends, a SYN is taken again")
    func maximumFlows() {
        var limits = TunnelTCP.Limits()
        limits.maximumFlows = 2
        var p = TCPPlaybook(limits: limits)
        p.handshake(port: 1)
        p.device(.syn, seq: 500, mss: 1460, port: 2)
        p.device(.syn, seq: 500, mss: 1460, port: 3)
        p.abort(port: 1)
        p.device(.syn, seq: 500, mss: 1460, port: 3)
        p.expect("""
            ← SYN seq=500 win=65535 mss=1460 (:2)
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380 (:2)
            ← SYN seq=500 win=65535 mss=1460 (:3)
            → RST|ACK seq=0 ack=501 win=0 (:3)
            abort (:1)
            → RST|ACK seq=1001 ack=501 win=0 (:1)
            ← SYN seq=500 win=65535 mss=1460 (:3)
            → SYN|ACK seq=1000 ack=501 win=65535 mss=1380 (:3)
            """)
        #expect(p.tcp.flowCount == 2)
    }

    // MARK: Sequence numbers and buffers

    @Test("Sequence numbers wrap past 2^32 both ways")
    func sequenceWrap() {
        var p = TCPPlaybook(initialSequence: UInt32.max - 1000)
        p.device(.syn, seq: UInt32.max - 2, mss: 1460)
        p.device(.ack, seq: UInt32.max - 1, ack: UInt32.max - 999)
        p.device(.ack, seq: UInt32.max - 1, ack: UInt32.max - 999, data: Array("0123456789".utf8))
        p.send(3000)
        p.device(.ack, seq: 8, ack: 1000)
        p.device([.fin, .ack], seq: 8, ack: 2000)
        p.finish()
        p.device(.ack, seq: 9, ack: 2001)
        p.expect("""
            ← SYN seq=4294967293 win=65535 mss=1460
            → SYN|ACK seq=4294966295 ack=4294967294 win=65535 mss=1380
            ← ACK seq=4294967294 ack=4294966296 win=65535
            • opened
            ← ACK seq=4294967294 ack=4294966296 win=65535 len=10
            → ACK seq=4294966296 ack=8 win=65535
            • data "0123456789"
            send 3000 bytes
            → ACK seq=4294966296 ack=8 win=65535 len=1380
            → ACK seq=380 ack=8 win=65535 len=1380
            → PSH|ACK seq=1760 ack=8 win=65535 len=240
            ← ACK seq=8 ack=1000 win=65535
            ← FIN|ACK seq=8 ack=2000 win=65535
            → ACK seq=2000 ack=9 win=65535
            • finished
            finish
            → FIN|ACK seq=2000 ack=9 win=65535
            ← ACK seq=9 ack=2001 win=65535
            """)
        #expect(p.deadline == "2.000s", "TIME-WAIT")
    }

    @Test("send past the buffer limit says full; writable once ACKs drain it below half")
    func sendBufferFull() {
        var limits = TunnelTCP.Limits()
        limits.sendBufferLimit = 4000
        var p = TCPPlaybook(limits: limits)
        p.handshake()
        p.send(3000)
        #expect(!p.tcp.isSendBufferFull(TCPPlaybook.flow()))
        p.send(1000)
        #expect(p.tcp.isSendBufferFull(TCPPlaybook.flow()))
        p.device(.ack, seq: 501, ack: 2381)
        #expect(p.tcp.isSendBufferFull(TCPPlaybook.flow()) == false)
        p.device(.ack, seq: 501, ack: 3761)
        p.device(.ack, seq: 501, ack: 5001)
        p.expect("""
            send 3000 bytes
            → ACK seq=1001 ack=501 win=65535 len=1380
            → ACK seq=2381 ack=501 win=65535 len=1380
            → PSH|ACK seq=3761 ack=501 win=65535 len=240
            send 1000 bytes
            → PSH|ACK seq=4001 ack=501 win=65535 len=1000
            ← ACK seq=501 ack=2381 win=65535
            ← ACK seq=501 ack=3761 win=65535
            • writable
            ← ACK seq=501 ack=5001 win=65535
            """)
    }

    // MARK: Parsing

    @Test("TCPSegment.parse refuses a short header, a bad data offset and a bad checksum; reads MSS; round-trips")
    func segmentParsing() {
        let device = TCPPlaybook.device, server = TCPPlaybook.server
        let segment = TCPSegment(
            sourcePort: 49152, destinationPort: 443, sequence: 500, acknowledgment: 7, flags: [.syn], window: 1234,
            maximumSegmentSize: 1460, payload: [1, 2, 3])
        let tcp = Array(segment.packet(from: device, to: server, identification: 9).dropFirst(20))
        #expect(TCPSegment.parse(tcp[...], source: device, destination: server) == .success(segment))
        // The pseudo-header counts: the same bytes from another address are refused.
        #expect(TCPSegment.parse(tcp[...], source: [198, 19, 0, 3], destination: server) == .failure(.badChecksum))
        for length in 0..<20 {
            #expect(TCPSegment.parse(tcp.prefix(length), source: device, destination: server) == .failure(.tooShort))
        }
        var small = tcp
        small[12] = 4 << 4
        #expect(TCPSegment.parse(small[...], source: device, destination: server) == .failure(.badDataOffset))
        #expect(TCPSegment.parse(tcp.prefix(23), source: device, destination: server) == .failure(.badDataOffset))
        for index in tcp.indices where ![12, 16, 17].contains(index) {  // 12: the data offset
            var flipped = tcp
            flipped[index] ^= 0x40
            #expect(TCPSegment.parse(flipped[...], source: device, destination: server) == .failure(.badChecksum),
                "byte \(index) flipped")
        }
        // A malformed option list ends the walk; the segment is still taken, without an MSS.
        var options = TCPSegment(
            sourcePort: 1, destinationPort: 2, sequence: 3, acknowledgment: 4, flags: .ack, window: 5,
            maximumSegmentSize: 1460
        ).packet(from: device, to: server, identification: 1)
        options[20 + 21] = 9  // MSS option length 9: past the header
        options[20 + 16] = 0
        options[20 + 17] = 0
        let checksum = TunnelChecksum.transport(
            source: device, destination: server, protocolNumber: 6, segment: options[20...])
        options[20 + 16] = UInt8(checksum >> 8)
        options[20 + 17] = UInt8(checksum & 0xFF)
        guard case .success(let parsed) = TCPSegment.parse(options[20...], source: device, destination: server) else {
            Issue.record("a bad option refused the segment")
            return
        }
        #expect(parsed.maximumSegmentSize == nil && parsed.sequence == 3)
    }

    @Test("The playbook's diff shows expected and actual lines")
    func diffHelper() {
        #expect(
            TCPPlaybook.diff(["a", "b", "c"], ["a", "x", "c", "d"]) == """
                  a
                - b
                + x
                  c
                + d
                """)
    }
}

extension TCPPlaybook {
    /// Takes the lines since the last check for a test to inspect itself (long runs stated by counts).
    mutating func expectLines(_ body: ([String]) -> Void) {
        body(lines)
        lines = []
    }
}

@Suite("WireGuard tunnel TCP routing")
struct WireGuardTunnelTCPTests {
    @Test("A TCP or UDP packet whose source is not the device's tunnel address is dropped; the right source answered")
    func cryptokeyRouting() throws {
        let pair = Pair()
        var tunnel = WireGuardTunnel(responder: pair.proxy, address: TCPPlaybook.proxy,
            deviceAddresses: [TCPPlaybook.device])
        let handshake = tunnel.receive(pair.initiation(), now: pair.now)
        let response = try #require(handshake.replies.first)
        #expect(pair.device.receive(response, now: pair.now) == .established(peer: 0))
        _ = tunnel.receive(try #require(pair.sendFromDevice([], now: pair.now)), now: pair.now)

        let syn = TCPSegment(
            sourcePort: 49152, destinationPort: 443, sequence: 500, acknowledgment: 0, flags: .syn, window: 65535,
            maximumSegmentSize: 1460)
        let spoofed = syn.packet(from: [198, 19, 0, 9], to: TCPPlaybook.server, identification: 1)
        let dropped = tunnel.receive(try #require(pair.sendFromDevice(spoofed, now: pair.now)), now: pair.now)
        #expect(dropped.datagrams.isEmpty && dropped.replies.isEmpty)
        #expect(dropped.events == [.dropped("TCP from 198.19.0.9, not the device's address")])
        #expect(tunnel.tcpState(of: 0).flowCount == 0 && tunnel.dropped == 1)

        let udpHeader = IPv4Header(
            source: [10, 0, 0, 1], destination: TCPPlaybook.proxy, protocolNumber: 17, ttl: 64, identification: 2)
        let udp = udpHeader.serialized(payloadLength: 8) + [0, 53, 0, 53, 0, 8, 0, 0]
        let udpDropped = tunnel.receive(try #require(pair.sendFromDevice(udp, now: pair.now)), now: pair.now)
        #expect(udpDropped.events == [.dropped("UDP from 10.0.0.1, not the device's address")])

        let genuine = syn.packet(from: TCPPlaybook.device, to: TCPPlaybook.server, identification: 3)
        let answered = tunnel.receive(try #require(pair.sendFromDevice(genuine, now: pair.now)), now: pair.now)
        #expect(answered.events.isEmpty && answered.datagrams.count == 1)
        let sealed = try #require(answered.datagrams.first)
        guard case .packet(0, let packet) = pair.device.receive(sealed.datagram, now: pair.now),
            case .success(.ipv4(let header, let payload)) = TunnelPacket.parse(packet),
            case .success(let synAck) = TCPSegment.parse(payload, source: header.source, destination: header.destination)
        else {
            Issue.record("the SYN-ACK does not open on the device")
            return
        }
        #expect(synAck.flags == [.syn, .ack] && synAck.acknowledgment == 501 && header.source == TCPPlaybook.server)
        #expect(tunnel.tcpState(of: 0).flowCount == 1)
    }
}
