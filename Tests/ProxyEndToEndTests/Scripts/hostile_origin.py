"""Usage: python3 hostile_origin.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

A misbehaving origin (HTTP, or HTTPS with `--tls CERT KEY`): argv MODE. Prints `PORT n` once it listens.
- `unasked`: answers each request with `conn C req R`; after the first response of each connection it sends a
  second, unrequested response (`EVIL`) in the same write.
- `upgrade`: answers every request with a 101 nobody asked for, followed by raw bytes.
- `silent`: reads the request and never answers (holds the connection up to 60 s).
"""
import socket, ssl, sys, threading, time

if __name__ == "__main__" and (len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

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
