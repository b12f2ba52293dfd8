import Foundation
import ProxyTrace

/// Captured entries on their way to the writer, already encoded as the values of the rows they become.
///
/// Theory of operation. The loop thread that made a record encodes it (`CaptureEncoder.append`) into the batch's
/// bytes while the record is still in its cache, and frees the record itself. The writer thread then only binds
/// slices of those bytes to its prepared statements. Handing the records themselves across would have the writer
/// encode them from another core's memory and free them there: with glibc that frees into the loop thread's arena
/// under its lock, and every string and array of the record is a reference count touched from two cores. Measured
/// before this design, that hand-off cost the loop threads about as much as the writer spent in SQLite.
///
/// A batch holds frames, each a kind byte and its payload:
/// - `exchange`: the connection slot (an `Int32`: an index into `connections`, or -1 when the writer already has
///   the connection's record), then a value per `ExchangeField`, in its order, then
///   a body count and each body (direction, total size, kept bytes).
/// - `trace`: connection id (or none), time, and the record as one element of a trace chunk (`TraceChunk`).
/// - `forget`: the encoder forgot the connections it had sent; the writer forgets them too.
///
/// A value is a tag byte (null, integer, real, text) and its bytes: integers and reals as 8 little-endian bytes,
/// text as a 4-byte length and its UTF-8 bytes. The format lives only in memory, between two threads of one
/// process; it is never stored.
///
/// Not copyable: a batch is one buffer with one owner at a time (the sink's queue, then the writer's side of the swap).
public struct CaptureBatch: ~Copyable, Sendable {
    var storage = BatchBytes()
    /// Connection records the frames refer to by slot: a connection's record is sent when it first appears and
    /// whenever it changed (its decision, its handshake, its client TLS), not with every exchange.
    var connections: [ConnectionRecord] = []
    /// Frames in the batch.
    public private(set) var count = 0
    /// Exchange frames in the batch (the rest are trace records and `forget`s).
    public private(set) var exchangeCount = 0
    /// Scratch for text assembled by code that writes arrays (heads, hosts), copied into the batch.
    private var scratch: [UInt8] = []

    public init() {}

    public var isEmpty: Bool { count == 0 }
    /// Bytes held: what the sink bounds its queue by.
    public var byteCount: Int { storage.count }

    /// Empties the batch, keeping its storage for the next one.
    public mutating func removeAll() {
        storage.count = 0
        connections.removeAll(keepingCapacity: true)
        count = 0
        exchangeCount = 0
    }

    /// A copy of the batch, for a writer that keeps it to write later (the team store while its database is down).
    func copied() -> CaptureBatch {
        var copy = CaptureBatch()
        withBytes { copy.storage.append($0) }
        copy.connections = connections
        copy.count = count
        copy.exchangeCount = exchangeCount
        return copy
    }

    /// The frames' bytes, for reading (`CaptureBatchReader`).
    func withBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: storage.base, count: storage.count))
    }

    enum Kind: UInt8 {
        case exchange = 1, trace = 2, forget = 3
    }

    /// A body's direction; also its place in `exchange_bodies`' id (exchange id × 2 + direction).
    enum Direction: UInt8 {
        case request = 0, response = 1
    }

    enum Tag: UInt8 {
        case null = 0, integer = 1, real = 2, text = 3
    }

    /// Values per exchange frame, in the order of `ExchangeField` (the writer binds `run_id`, `decision_id` and
    /// `handshake_id` itself, before them).
    static let exchangeColumns = ExchangeField.allCases.count

    // MARK: Writing values

    mutating func begin(_ kind: Kind) {
        storage.append(kind.rawValue)
        count += 1
        if kind == .exchange { exchangeCount += 1 }
    }

    mutating func null() { storage.append(Tag.null.rawValue) }

    mutating func int(_ value: Int64?) {
        guard let value else { return null() }
        storage.append(Tag.integer.rawValue, UInt64(bitPattern: value))
    }

    mutating func int(_ value: Int?) { int(value.map(Int64.init)) }

    mutating func bool(_ value: Bool?) { int(value.map { $0 ? 1 : 0 }) }

    mutating func double(_ value: Double?) {
        guard let value else { return null() }
        storage.append(Tag.real.rawValue, value.bitPattern)
    }

    mutating func text(_ value: String?) {
        guard var value else { return null() }
        value.withUTF8 { text(utf8: UnsafeRawBufferPointer($0)) }
    }

    mutating func text(utf8: UnsafeRawBufferPointer) {
        storage.appendText(utf8)
    }

    /// A text value assembled by `write` (heads and hosts are written by code that appends to arrays).
    mutating func text(writing write: (inout [UInt8]) -> Void) {
        scratch.removeAll(keepingCapacity: true)
        write(&scratch)
        scratch.withUnsafeBytes { text(utf8: $0) }
    }

    mutating func byte(_ value: UInt8) { storage.append(value) }

    mutating func raw(_ value: UInt64) { storage.append(value) }

    mutating func raw32(_ value: UInt32) { storage.append(value) }

    mutating func raw(_ bytes: UnsafeRawBufferPointer) { storage.append(bytes) }
}

/// A growable run of bytes written with plain stores: appending a tag and an integer to a `[UInt8]` went through
/// the generic sequence append and cost some 150 instructions. Owned by one batch at a time; the writer reads it
/// after the hand-off, under the sink's lock.
final class BatchBytes: @unchecked Sendable {
    // @unchecked: one thread at a time (the batch's owner); the hand-off is under a lock.
    private(set) var base: UnsafeMutableRawPointer?
    private var capacity = 0
    var count = 0

    init() {}

    deinit { base?.deallocate() }

    @inline(__always)
    private func reserve(_ more: Int) -> UnsafeMutableRawPointer {
        if count + more > capacity { grow(to: count + more) }
        return base.unsafelyUnwrapped + count
    }

    private func grow(to needed: Int) {
        let newCapacity = max(needed, capacity * 2, 64 << 10)
        let grown = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 16)
        if let base {
            grown.copyMemory(from: base, byteCount: count)
            base.deallocate()
        }
        base = grown
        capacity = newCapacity
    }

    func append(_ byte: UInt8) {
        reserve(1).storeBytes(of: byte, as: UInt8.self)
        count += 1
    }

    func append<T: FixedWidthInteger>(_ value: T) {
        reserve(MemoryLayout<T>.size).storeBytes(of: value.littleEndian, as: T.self)
        count += MemoryLayout<T>.size
    }

    func append<T: FixedWidthInteger>(_ tag: UInt8, _ value: T) {
        let at = reserve(1 + MemoryLayout<T>.size)
        at.storeBytes(of: tag, as: UInt8.self)
        (at + 1).storeBytes(of: value.littleEndian, as: T.self)
        count += 1 + MemoryLayout<T>.size
    }

    /// A text value: its tag, its length and its bytes, with one capacity check.
    func appendText(_ bytes: UnsafeRawBufferPointer) {
        let at = reserve(5 + bytes.count)
        at.storeBytes(of: CaptureBatch.Tag.text.rawValue, as: UInt8.self)
        (at + 1).storeBytes(of: UInt32(bytes.count).littleEndian, as: UInt32.self)
        if let source = bytes.baseAddress, !bytes.isEmpty { (at + 5).copyMemory(from: source, byteCount: bytes.count) }
        count += 5 + bytes.count
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(bytes.count).copyMemory(from: source, byteCount: bytes.count)
        count += bytes.count
    }
}

/// Encodes capture items into batches on the threads that made them (`CaptureBatch`), remembering which connection
/// records it already sent so a keep-alive connection's record crosses to the writer once, not per exchange. Used
/// under its owner's lock: one thread at a time.
public struct CaptureEncoder {
    private var sent: [UInt64: ConnectionRecord] = [:]
    /// Connections remembered before all are forgotten (and each sends its record again): bounds the memory a
    /// session of many short connections holds.
    static let connectionLimit = 4096

    public init() {}

    /// Appends `item` to `batch` as a frame.
    public mutating func append(_ item: CaptureItem, to batch: inout CaptureBatch) {
        switch item {
        case .exchange(let exchange): append(exchange, to: &batch)
        case .trace(let record, let time): Self.append(record, time: time, to: &batch)
        }
    }

    private mutating func append(_ e: ExchangeSummary, to batch: inout CaptureBatch) {
        e.withRecord { connection, action, detail in append(e, connection, action, detail, to: &batch) }
    }

    private mutating func append(
        _ e: ExchangeSummary, _ connection: ConnectionRecord?, _ action: ExchangeAction?, _ detail: ExchangeDetail?,
        to batch: inout CaptureBatch
    ) {
        var slot: Int32 = -1
        if let connection, !Self.sameRows(sent[connection.connectionID], connection) {
            if sent.count >= Self.connectionLimit {
                sent.removeAll()
                batch.begin(.forget)
            }
            sent[connection.connectionID] = connection
            slot = Int32(batch.connections.count)
            batch.connections.append(connection)
        }
        batch.begin(.exchange)
        batch.raw32(UInt32(bitPattern: slot))
        let ended = detail?.timings.ended ?? Date().timeIntervalSince1970
        let started = detail?.timings.started ?? ended - e.durationMilliseconds / 1000
        // A value per column, in the order of their declaration (the writers' INSERT and COPY follow it too).
        let upstream = connection?.upstreamTLS
        for field in ExchangeField.inOrder {
            switch field {
            case .connectionID: batch.int(connection.map { Int64(bitPattern: $0.connectionID) })
            case .started: batch.double(started)
            case .requestSent: batch.double(detail?.timings.requestSent)
            case .firstResponseByte: batch.double(detail?.timings.firstResponseByte)
            case .ended: batch.double(ended)
            case .method: batch.text(e.method)
            case .url: batch.text(e.url)
            case .host: batch.text { CaptureWriter.appendHost(of: e.url, to: &$0) }
            case .status: batch.int(e.status)
            case .httpVersion: batch.text(e.httpVersion)
            case .outcome: batch.text(e.outcome.rawValue)
            case .action: batch.text(action?.rawValue)
            case .errors:
                if e.errors.isEmpty {
                    batch.text("")
                } else {
                    batch.text(e.errors.map(\.shortCode).joined(separator: ","))
                }
            case .urlError: batch.int(e.errors.first?.urlError.code)
            case .sslError: batch.int(e.errors.first?.sslError?.code)
            case .requestBytes: batch.int(e.requestBytes)
            case .responseBytes: batch.int(e.responseBytes)
            case .durationMilliseconds: batch.double(e.durationMilliseconds)
            case .interruption: batch.text(e.interruption)
            case .note: batch.text(e.note)
            case .upstreamTLSVersion: batch.text(upstream?.version)
            case .upstreamTLSSuite: batch.text(upstream?.cipherSuite)
            case .upstreamALPN: batch.text(upstream?.alpn)
            case .upstreamSNI: batch.text(upstream?.serverName)
            case .upstreamResumed: batch.bool(upstream?.resumed)
            case .requestHead:
                if let head = detail?.request {
                    batch.text { HeadText.appendRequest(head, to: &$0) }
                } else {
                    batch.null()
                }
            case .forwardedRequestHead:
                if let head = detail?.forwardedRequest {
                    batch.text { HeadText.appendRequest(head, to: &$0) }
                } else {
                    batch.null()
                }
            case .responseHead:
                if let head = detail?.response {
                    batch.text { HeadText.appendResponse(head, to: &$0) }
                } else {
                    batch.null()
                }
            case .clientResponseHead:
                if let head = detail?.clientResponse {
                    batch.text { HeadText.appendResponse(head, to: &$0) }
                } else {
                    batch.null()
                }
            case .upstreamAddress: batch.text(connection?.upstreamAddress)
            case .mirror: Self.appendMirror(e.mirror, to: &batch)
            case .rebuiltTrace:
                let rebuilt = detail?.rebuiltTrace ?? []
                batch.int(rebuilt.isEmpty ? nil : Int64(rebuilt.rawValue))
            case .rules: Self.appendRules(e.rules, to: &batch)
            case .replayOf: batch.int(e.replayOf)
            }
        }
        // Bodies: none stored for an empty one (a missing row is zero bytes).
        let request = (detail?.requestBody?.totalBytes ?? 0) > 0
        let response = (detail?.responseBody?.totalBytes ?? 0) > 0
        batch.byte((request ? 1 : 0) + (response ? 1 : 0))
        if request, let body = detail?.requestBody { Self.body(body, direction: .request, &batch) }
        if response, let body = detail?.responseBody { Self.body(body, direction: .response, &batch) }
    }

    /// Only `--ats mirror` exchanges have one, so Foundation's encoder stays off the common path.
    private static func appendMirror(_ mirror: MirrorRecord?, to batch: inout CaptureBatch) {
        guard let mirror else { return batch.null() }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            batch.text(String(decoding: try encoder.encode(mirror), as: UTF8.self))
        } catch {
            // Unreachable: a MirrorRecord holds strings, booleans and string arrays, which JSONEncoder always
            // writes. Were it to fail, the exchange keeps its row without the device's verdict.
            batch.null()
        }
    }

    /// Only exchanges a rule touched have any: Foundation's encoder stays off the common path, as for `mirror`.
    private static func appendRules(_ rules: [AppliedRule], to batch: inout CaptureBatch) {
        guard !rules.isEmpty else { return batch.null() }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            batch.text(String(decoding: try encoder.encode(rules), as: UTF8.self))
        } catch {
            // Unreachable (strings only); were it to fail, the row is kept without its rules.
            batch.null()
        }
    }

    private static func body(_ body: CapturedBody, direction: CaptureBatch.Direction, _ batch: inout CaptureBatch) {
        batch.byte(direction.rawValue)
        batch.raw(UInt64(body.totalBytes))
        batch.raw32(UInt32(body.bytes.count))
        body.bytes.withUnsafeBytes { batch.raw($0) }
    }

    /// Whether the writer would store the same connection row and refer to the same decision and handshake rows for
    /// `b` as for `a`. Values a connection keeps share their storage, which makes the comparison quick.
    private static func sameRows(_ a: ConnectionRecord?, _ b: ConnectionRecord) -> Bool {
        guard let a else { return false }
        if a.isUnchangedCopy(of: b) { return true }
        return a.clientAddress == b.clientAddress && a.clientTLS == b.clientTLS && a.decision == b.decision
            && a.violations == b.violations && a.upstreamHandshake == b.upstreamHandshake
    }

    private static func append(_ record: DiagnosticsRecord, time: Double, to batch: inout CaptureBatch) {
        batch.begin(.trace)
        batch.int(record.connectionID.map { Int64(bitPattern: $0) })
        batch.raw(time.bitPattern)
        batch.text { TraceChunk.appendElement(record, time: time, to: &$0) }
    }
}

/// Reads a batch's frames back, in order (the writer's side of `CaptureBatch`). The batch's bytes must outlive the
/// reader and every statement bound from it.
struct CaptureBatchReader {
    private let base: UnsafeRawBufferPointer
    private var at = 0

    init(_ base: UnsafeRawBufferPointer) { self.base = base }

    var atEnd: Bool { at >= base.count }

    mutating func kind() -> CaptureBatch.Kind? { CaptureBatch.Kind(rawValue: byte()) }

    mutating func byte() -> UInt8 {
        defer { at += 1 }
        return base[at]
    }

    mutating func raw() -> UInt64 {
        defer { at += 8 }
        return UInt64(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt64.self))
    }

    mutating func raw32() -> UInt32 {
        defer { at += 4 }
        return UInt32(littleEndian: base.loadUnaligned(fromByteOffset: at, as: UInt32.self))
    }

    mutating func bytes(_ count: Int) -> UnsafeRawBufferPointer {
        defer { at += count }
        return UnsafeRawBufferPointer(rebasing: base[at..<(at + count)])
    }

    /// One value, as the writer binds it.
    mutating func value() -> Value {
        switch CaptureBatch.Tag(rawValue: byte()) {
        case .integer: .integer(Int64(bitPattern: raw()))
        case .real: .real(Double(bitPattern: raw()))
        case .text: .text(bytes(Int(raw32())))
        case .null, nil: .null
        }
    }

    enum Value {
        case null
        case integer(Int64)
        case real(Double)
        case text(UnsafeRawBufferPointer)
    }
}
