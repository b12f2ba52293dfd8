import Foundation

/// A misbehaving origin (HTTP, or HTTPS with `--tls CERT KEY`): argv MODE. Prints `PORT n` once it listens.
/// - `unasked`: answers each request with `conn C req R`; after the first response of each connection it sends a
///   second, unrequested response (`EVIL`) in the same write.
/// - `upgrade`: answers every request with a 101 nobody asked for, followed by raw bytes.
/// - `silent`: reads the request and never answers (holds the connection up to 60 s).
let hostileOriginScript = #"""
import socket, ssl, sys, threading, time

MODE = sys.argv[1]
ctx = None
if len(sys.argv) > 2 and sys.argv[2] == "--tls":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[3], sys.argv[4])
lock = threading.Lock()
conns = [0]

def read_head(f):
    lines = []
    while True:
        line = f.readline(65536)
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            return lines
        lines.append(line)

def serve(raw):
    with lock:
        conns[0] += 1
        number = conns[0]
    try:
        s = ctx.wrap_socket(raw, server_side=True) if ctx else raw
        s.settimeout(60)
        f = s.makefile("rb")
        requests = 0
        while True:
            head = read_head(f)
            if head is None:
                break
            requests += 1
            if MODE == "silent":
                time.sleep(60)
                break
            if MODE == "upgrade":
                s.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: raw\r\n\r\nRAW BYTES")
                time.sleep(5)
                break
            body = b"conn %d req %d" % (number, requests)
            out = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
            if requests == 1:
                out += b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\nX-Evil: 1\r\n\r\nEVIL"
            s.sendall(out)
    except (OSError, ssl.SSLError):
        pass
    finally:
        raw.close()

listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(64)
print("PORT %d" % listener.getsockname()[1], flush=True)
deadline = time.time() + 300
listener.settimeout(1)
while time.time() < deadline:
    try:
        c, _ = listener.accept()
    except socket.timeout:
        continue
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""#

/// A client that stalls on purpose: argv PROXY_PORT MODE HOST. Prints one JSON object: what it read until the proxy
/// closed (`text`), whether the proxy closed (`closed`) and after how many seconds of stalling (`seconds`).
/// - `head`: one complete request, then half of a second head on the same connection.
/// - `body`: a POST head announcing 100 bytes, then one byte of them.
/// - `hello`: CONNECT, then three bytes of a TLS record.
/// - `handshake`: CONNECT, then a real ClientHello, and nothing of the rest of the handshake.
let slowClientScript = #"""
import json, socket, ssl, sys, time

PORT = int(sys.argv[1]); MODE = sys.argv[2]; HOST = sys.argv[3]
s = socket.create_connection(("127.0.0.1", PORT), timeout=30)
got = b""

def read_head():
    data = b""
    while b"\r\n\r\n" not in data:
        piece = s.recv(65536)
        if not piece:
            break
        data += piece
    return data

if MODE == "head":
    s.sendall(b"GET http://%s/bytes/10 HTTP/1.1\r\nHost: %s\r\n\r\n" % (HOST.encode(), HOST.encode()))
    first = read_head()
    length = int([l.split(b":")[1] for l in first.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
    body = first.split(b"\r\n\r\n", 1)[1]
    while len(body) < length:
        body += s.recv(65536)
    s.sendall(b"GET http://%s/second HTTP/1.1\r\nHo" % HOST.encode())
elif MODE == "body":
    s.sendall(b"POST http://%s/up HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\nx" % (HOST.encode(), HOST.encode()))
elif MODE in ("hello", "handshake"):
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (HOST.encode(), HOST.encode()))
    read_head()
    if MODE == "hello":
        s.sendall(b"\x16\x03\x01")
    else:
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname=HOST)
        try:
            tls.do_handshake()
        except ssl.SSLWantReadError:
            pass
        s.sendall(outgoing.read())
start = time.time()
closed = False
while time.time() - start < 25:
    try:
        piece = s.recv(65536)
    except ConnectionResetError:
        closed = True
        break
    if not piece:
        closed = True
        break
    got += piece
print(json.dumps({"text": got.decode("latin-1"), "closed": closed, "seconds": time.time() - start}))
"""#

/// Starts the hostile origin in `mode`, plain or with the test certificate `tls`.
func hostileOrigin(_ e2e: E2E, mode: String, tls: String? = nil, in folder: URL) async throws -> TestProcess {
    let script = folder.appendingPathComponent("hostile-origin.py")
    if !FileManager.default.fileExists(atPath: script.path) {
        try hostileOriginScript.write(to: script, atomically: true, encoding: .utf8)
    }
    var args = [script.path, mode]
    if let tls {
        let (cert, key) = e2e.cert(tls)
        args += ["--tls", cert, key]
    }
    return try TestProcess("/usr/bin/python3", args, in: folder, name: "hostile-\(mode)")
}

/// The port a hostile origin printed.
func port(of origin: TestProcess) async throws -> Int {
    try await origin.waitForOutput { text in
        text.split(separator: "\n").first { $0.hasPrefix("PORT ") }.flatMap { Int($0.dropFirst(5)) }
    }
}

/// Runs the slow client against `proxy` and decodes its JSON line.
func slowClient(_ proxy: Proxy, mode: String, host: String, in folder: URL) async throws -> [String: Any] {
    let script = folder.appendingPathComponent("slow-client.py")
    if !FileManager.default.fileExists(atPath: script.path) {
        try slowClientScript.write(to: script, atomically: true, encoding: .utf8)
    }
    let r = try await runProcess(
        "/usr/bin/python3", [script.path, String(proxy.port), mode, host], in: folder, timeout: .seconds(40))
    guard r.status == 0, let line = r.stdout.split(separator: "\n").last,
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
    else { throw HarnessError("slow-client.py \(mode) failed (\(r.status)): \(r.stdout)\n\(r.stderr.suffix(2000))") }
    return object
}
