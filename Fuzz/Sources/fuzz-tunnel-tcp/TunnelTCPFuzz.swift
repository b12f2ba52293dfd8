import FuzzSupport
import WireGuardCore

// Input: [limits] then operations, each an opcode byte and its arguments, on one device's TunnelTCP with four
// possible flows (device ports 1 to 4, one destination):
// - a segment from the device, built from the input (flags, sequence and acknowledgment near the flow's ISNs or
//   anywhere, window, MSS, payload), through the IP layer as the tunnel sends it;
// - raw bytes as a TCP header and payload, their checksum made right so options and offsets reach the parser;
// - the session's calls: send (up to 4 KiB), finish, abort, pause and resume; ticks (the clock moved, or set to
//   the next deadline). The clock only moves forward.
// Invariants: nothing traps or hangs; flowCount ≤ maximumFlows; every packet out parses (IPv4 and TCP checksums)
// and goes from the flow's destination to the device; after tick(now) no deadline is at or before now; events
// make sense per flow (opened once, data and finished only while open, nothing after reset or closed).

private let device: [UInt8] = [198, 19, 0, 2]
private let server: [UInt8] = [93, 184, 216, 34]
private let proxy: [UInt8] = [198, 19, 0, 1]

private struct Reader {
    var bytes: ArraySlice<UInt8>
    mutating func u8() -> UInt8 { bytes.popFirst() ?? 0 }
    mutating func u16() -> UInt16 { UInt16(u8()) << 8 | UInt16(u8()) }
    mutating func u32() -> UInt32 { UInt32(u16()) << 16 | UInt32(u16()) }
    mutating func take(_ count: Int) -> [UInt8] {
        let out = Array(bytes.prefix(count))
        bytes = bytes.dropFirst(count)
        return out
    }
}

private func flow(_ port: UInt16) -> TunnelTCP.FlowID {
    TunnelTCP.FlowID(device: 0xC613_0002, devicePort: port, destination: 0x5DB8_D822, destinationPort: 443)
}

func fuzzTunnelTCP(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    var input = FuzzInput(data, count)
    let shape = input.control()
    var limits = TunnelTCP.Limits()
    limits.maximumFlows = Int(shape & 0x03) + 1
    if shape & 0x04 != 0 { limits.receiveWindow = 1000 }
    if shape & 0x08 != 0 { limits.sendBufferLimit = 3000 }
    if shape & 0x10 != 0 { limits.maximumSegmentSize = 100 }
    var tcp = TunnelTCP(limits: limits, initialSequence: { 1000 })
    var reader = Reader(bytes: input.payload[...])
    var now: UInt64 = 1_000_000_000
    var open: Set<UInt16> = []
    var steps = 0

    func check(_ output: TunnelTCP.Output, _ tcp: TunnelTCP, _ open: inout Set<UInt16>) {
        invariant(tcp.flowCount <= limits.maximumFlows, "\(tcp.flowCount) flows, more than \(limits.maximumFlows)")
        for packet in output.packets {
            guard case .success(.ipv4(let header, let payload)) = TunnelPacket.parse(packet),
                header.source == server, header.destination == device,
                case .success(let segment) = TCPSegment.parse(payload, source: header.source,
                    destination: header.destination)
            else {
                invariant(false, "a packet out does not parse or is misaddressed")
                return
            }
            invariant(segment.sourcePort == 443 && (1...4).contains(segment.destinationPort), "wrong ports")
        }
        for event in output.events {
            switch event {
            case .opened(let id):
                invariant(!open.contains(id.devicePort), "opened twice: \(id)")
                open.insert(id.devicePort)
            case .data(let id, let bytes):
                invariant(open.contains(id.devicePort) && !bytes.isEmpty, "data on a flow not open, or empty")
            case .finished(let id), .writable(let id):
                invariant(open.contains(id.devicePort), "\(event) on a flow not open")
            case .reset(let id), .closed(let id):
                invariant(open.remove(id.devicePort) != nil, "\(event) on a flow not open")
            }
        }
    }

    while !reader.bytes.isEmpty, steps < 400 {
        steps += 1
        let op = reader.u8()
        let port = UInt16(op >> 4 & 0x03) + 1
        now += UInt64(reader.u8()) * 1_000_000  // up to 255 ms between operations
        let output: TunnelTCP.Output
        switch op & 0x0F {
        case 0, 1, 2, 3:  // a segment near the ISNs (device 500, ours 1000)
            let flags = TCPSegment.Flags(rawValue: reader.u8() & 0x1F)
            let near = op & 0x02 == 0
            let seq = near ? 500 &+ UInt32(reader.u16()) &- 16 : reader.u32()
            let ack = near ? 1000 &+ UInt32(reader.u16()) &- 16 : reader.u32()
            let window = reader.u8() & 0x80 == 0 ? UInt16(reader.u8()) << 8 : reader.u16()
            let mssByte = reader.u8()
            let mss: UInt16? = mssByte == 0 ? nil : mssByte == 1 ? 0 : UInt16(mssByte) * 8
            let payload = reader.take(Int(reader.u8() & 0x3F) * (op & 0x01 == 0 ? 1 : 32))
            let segment = TCPSegment(
                sourcePort: port, destinationPort: 443, sequence: seq, acknowledgment: ack, flags: flags,
                window: window, maximumSegmentSize: mss, payload: payload[...])
            output = deliver(segment.packet(from: device, to: server, identification: 1), &tcp, now)
        case 4:  // raw TCP bytes, checksum made right
            var raw = reader.take(Int(reader.u8() & 0x7F))
            if raw.count >= 20 {
                raw[0] = 0
                raw[1] = UInt8(port)
                raw[2] = 0x01
                raw[3] = 0xBB
                raw[16] = 0
                raw[17] = 0
                let sum = TunnelChecksum.transport(source: device, destination: server, protocolNumber: 6, segment: raw[...])
                raw[16] = UInt8(sum >> 8)
                raw[17] = UInt8(sum & 0xFF)
            }
            output = deliver(ipv4(raw), &tcp, now)
        case 5, 6:
            let bytes = [UInt8](repeating: reader.u8(), count: Int(reader.u8()) * 16 + 1)
            output = tcp.send(bytes, on: flow(port), now: now)
        case 7: output = tcp.finish(flow(port), now: now)
        case 8:
            output = tcp.abort(flow(port))
            open.remove(port)
        case 9: output = tcp.setReceivePaused(reader.u8() & 1 == 0, on: flow(port))
        case 10, 11:  // the next deadline
            if let deadline = tcp.nextDeadline, deadline > now { now = deadline }
            output = tcp.tick(now: now)
            if let next = tcp.nextDeadline { invariant(next > now, "a deadline at or before the tick's time") }
        default:  // seconds pass
            now += UInt64(reader.u8()) * 1_000_000_000
            output = tcp.tick(now: now)
            if let next = tcp.nextDeadline { invariant(next > now, "a deadline at or before the tick's time") }
        }
        check(output, tcp, &open)
    }
    return 0
}

private func deliver(_ packet: [UInt8], _ tcp: inout TunnelTCP, _ now: UInt64) -> TunnelTCP.Output {
    guard case .tcp(let segment, let source, let destination) = TunnelIPLayer(address: proxy).handle(packet) else {
        return TunnelTCP.Output()
    }
    return tcp.receive(segment, source: source, destination: destination, now: now)
}

/// An IPv4 packet (20-byte header, TCP) from the device to the server around `payload`.
private func ipv4(_ payload: [UInt8]) -> [UInt8] {
    let total = 20 + payload.count
    var header: [UInt8] = [0x45, 0, UInt8(total >> 8), UInt8(total & 0xFF), 0, 1, 0x40, 0, 64, 6, 0, 0] + device + server
    var sum: UInt32 = 0
    for i in stride(from: 0, to: 20, by: 2) { sum += UInt32(header[i]) << 8 | UInt32(header[i + 1]) }
    while sum >> 16 != 0 { sum = (sum & 0xFFFF) + (sum >> 16) }
    header[10] = UInt8((~sum >> 8) & 0xFF)
    header[11] = UInt8(~sum & 0xFF)
    return header + payload
}
