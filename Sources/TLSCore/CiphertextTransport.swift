internal import COpenSSL

/// Where a `TLSEngine`'s OpenSSL session reads ciphertext from and writes it to: a BIO of our own over Swift storage.
///
/// Why not a pair of memory BIOs: a memory BIO copies every byte in and again out, and OpenSSL 3.0 zeroes each
/// byte it grows by before copying into it (`BUF_MEM_grow_clean`). Here OpenSSL reads a socket read's bytes
/// straight from the caller's buffer while it is lent (`lend(_:)`), and writes its records straight into the array
/// that `takeOutput()` hands on: per byte relayed, two copies and two `memset`s fewer.
///
/// Reads come from `kept` (fed arrays, and the unread tail of an ended loan) and then from the loan, so the byte
/// order is the order of feeding. Confined to its engine's thread.
///
/// Exclusivity: the state is touched only by these methods and the BIO callbacks, which OpenSSL calls from inside
/// the engine's own calls on the same thread, and no access spans another. The runtime's dynamic check (about
/// thirty per request here, each a thread-local lookup and a record) is switched off with `@exclusivity(unchecked)`;
/// the compile-time checks still apply.
final class CiphertextTransport {
    /// Ciphertext kept in our storage, unread from `keptStart` on.
    @exclusivity(unchecked) private var kept: [UInt8] = []
    @exclusivity(unchecked) private var keptStart = 0
    /// The caller's buffer, readable until `endLoan()`, unread from `lentStart` on.
    @exclusivity(unchecked) private var lent = UnsafeRawBufferPointer(start: nil, count: 0)
    @exclusivity(unchecked) private var lentStart = 0
    /// Records OpenSSL has written and `takeOutput()` has not taken.
    @exclusivity(unchecked) private(set) var output: [UInt8] = []
    /// The peer's input ended: once the unread bytes are gone, reads report end of file instead of "retry".
    @exclusivity(unchecked) var endOfInput = false

    /// The OpenSSL BIO over this storage; the SSL that is given it owns it.
    let bio: OpaquePointer

    init() throws(OpenSSLError) {
        guard let method = CiphertextTransport.method.pointer else { throw OpenSSLError.drain("BIO_meth_new") }
        bio = try checkNotNull("BIO_new") { BIO_new(method) }
        BIO_set_init(bio, 1)
        // Unretained: the engine holds this object for longer than its SSL (and so this BIO) lives.
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Fed ciphertext not yet read by OpenSSL.
    var unreadCount: Int { kept.count - keptStart + lent.count - lentStart }

    /// Appends a copy of `bytes` after everything fed or lent so far.
    func keep(_ bytes: UnsafeRawBufferPointer) {
        endLoan()  // a loan's unread bytes come first
        if keptStart > 0 {
            kept.removeSubrange(0..<keptStart)
            keptStart = 0
        }
        kept.append(contentsOf: bytes)
    }

    /// Lets OpenSSL read `bytes` in place until `endLoan()`, after what was kept. One loan at a time.
    func lend(_ bytes: UnsafeRawBufferPointer) {
        endLoan()
        lent = bytes
        lentStart = 0
    }

    /// Ends the loan: the bytes OpenSSL has not read yet are copied into our storage (usually a partial record).
    func endLoan() {
        guard lent.baseAddress != nil else { return }
        let rest = UnsafeRawBufferPointer(rebasing: lent[lentStart...])
        lent = UnsafeRawBufferPointer(start: nil, count: 0)
        lentStart = 0
        if !rest.isEmpty { keep(rest) }
    }

    /// Reserves room for `count` more output bytes, so that a write's records land without the array growing.
    func reserveOutput(_ count: Int) {
        output.reserveCapacity(output.count + count)
    }

    /// The records written so far; the transport starts a new array.
    func takeOutput() -> [UInt8] {
        var taken: [UInt8] = []
        swap(&taken, &output)
        return taken
    }

    /// Gives back storage that holds nothing unread or untaken (a quiet connection's memory).
    func releaseStorage() {
        if keptStart == kept.count {
            kept = []
            keptStart = 0
        }
        if output.isEmpty { output = [] }
    }

    // MARK: What the BIO callbacks do

    /// Copies up to `room.count` unread bytes into `room`; returns how many.
    fileprivate func read(into room: UnsafeMutableRawBufferPointer) -> Int {
        var copied = 0
        if keptStart < kept.count {
            let n = min(room.count, kept.count - keptStart)
            kept.withUnsafeBytes { room.baseAddress!.copyMemory(from: $0.baseAddress! + keptStart, byteCount: n) }
            keptStart += n
            copied = n
            if keptStart == kept.count {
                kept.removeAll(keepingCapacity: true)
                keptStart = 0
            }
        }
        if copied < room.count, lentStart < lent.count {
            let n = min(room.count - copied, lent.count - lentStart)
            (room.baseAddress! + copied).copyMemory(from: lent.baseAddress! + lentStart, byteCount: n)
            lentStart += n
            copied += n
        }
        return copied
    }

    fileprivate func write(_ bytes: UnsafeRawBufferPointer) {
        output.append(contentsOf: bytes)
    }

    // MARK: The BIO method

    /// Made once per process; nil only if OpenSSL could not allocate it.
    private struct Method: @unchecked Sendable {
        let pointer: OpaquePointer?
    }

    private static let method: Method = {
        guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ATSProxy ciphertext") else {
            return Method(pointer: nil)
        }
        _ = BIO_meth_set_write_ex(method) { bio, data, length, written in
            guard let bio, let transport = CiphertextTransport.of(bio) else { return 0 }
            if length > 0, let data { transport.write(UnsafeRawBufferPointer(start: data, count: length)) }
            written?.pointee = length
            return 1
        }
        _ = BIO_meth_set_read_ex(method) { bio, data, length, readBytes in
            guard let bio, let transport = CiphertextTransport.of(bio) else { return 0 }
            copenssl_BIO_clear_retry_flags(bio)
            let n = length > 0 && data != nil
                ? transport.read(into: UnsafeMutableRawBufferPointer(start: data, count: length)) : 0
            readBytes?.pointee = n
            if n > 0 { return 1 }
            // Nothing unread: "try again" while the peer may send more, end of file once it cannot.
            if !transport.endOfInput { copenssl_BIO_set_retry_read(bio) }
            return 0
        }
        _ = BIO_meth_set_ctrl(method) { bio, command, _, _ in
            // The command first: OpenSSL asks for kernel TLS on every record, and that answer needs no transport.
            switch command {
            case BIO_CTRL_FLUSH: return 1  // nothing is buffered between OpenSSL and `output`
            case BIO_CTRL_EOF, BIO_CTRL_PENDING, BIO_CTRL_WPENDING:
                guard let bio, let transport = CiphertextTransport.of(bio) else { return 0 }
                switch command {
                case BIO_CTRL_EOF: return transport.endOfInput && transport.unreadCount == 0 ? 1 : 0
                case BIO_CTRL_PENDING: return transport.unreadCount
                default: return transport.output.count
                }
            default: return 0  // push, pop, kTLS queries and the rest: not supported, as for a memory BIO
            }
        }
        return Method(pointer: method)
    }()

    private static func of(_ bio: OpaquePointer) -> CiphertextTransport? {
        BIO_get_data(bio).map { Unmanaged<CiphertextTransport>.fromOpaque($0).takeUnretainedValue() }
    }
}
