"""Usage: python3 origin.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

The tiny Python origin the tests start (HTTP or HTTPS): fixed bodies with their SHA-256, chunked bodies, upload
checksums, a mid-body reset, a gzip-encoded text (/gzip/TEXT, /gzip-chunked/TEXT), and a 101 Upgrade that echoes
bytes. Prints `PORT n` once it listens.
"""
import gzip, hashlib, http.server, urllib.parse, os, random, socket, socketserver, ssl, struct, sys, threading

# Tiny test origin: prints "PORT n" once listening. argv: [--tls CERT KEY] [--tls10 | --tls12 (at most 1.2)]
# It listens on 127.0.0.1, a free port, or on $ORIGIN_ADDRESS:$ORIGIN_PORT (an origin in a network namespace).

if __name__ == "__main__" and (sys.argv[1:2] in (["-h"], ["--help"])):
    sys.exit(__doc__)
_cache = {}
_lock = threading.Lock()
def body(n):
    with _lock:
        if n not in _cache:
            _cache[n] = random.Random(n).randbytes(n)
        return _cache[n]

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass

    def send_bytes(self, data, extra=()):
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Body-SHA256", hashlib.sha256(data).hexdigest())
        for k, v in extra: self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[0] == "bytes":
            self.send_bytes(body(int(parts[1])), [("X-Seen-Target", self.path), ("X-Seen-Proxy-Headers", ",".join(k for k in self.headers if k.lower().startswith("proxy-")) or "none")])
        elif parts[0] == "chunked":
            data = body(int(parts[1]))
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("X-Body-SHA256", hashlib.sha256(data).hexdigest())
            self.end_headers()
            i, step = 0, 1
            while i < len(data):
                piece = data[i:i + step]
                self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
                i += len(piece); step = step * 3 + 1
            self.wfile.write(b"0\r\n\r\n")
        elif parts[0] in ("gzip", "gzip-chunked"):
            # TEXT (URL-decoded) gzip-encoded as text/plain, with its length or chunked in two chunks.
            data = gzip.compress(urllib.parse.unquote("/".join(parts[1:])).encode())
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Encoding", "gzip")
            if parts[0] == "gzip":
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            else:
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                half = len(data) // 2
                for piece in (data[:half], data[half:]):
                    self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
        elif parts[0] == "reset":
            n = int(parts[1])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            self.wfile.write(body(n)[: n // 2])
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        elif parts[0] == "eof":
            # A body framed by the end of the connection (no Content-Length, no chunking).
            data = body(int(parts[1]))
            self.send_response(200)
            self.send_header("Connection", "close")
            self.send_header("X-Body-SHA256", hashlib.sha256(data).hexdigest())
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True
        elif parts[0] == "ws":
            self.send_response(101, "Switching Protocols")
            self.send_header("Upgrade", "echo")
            self.send_header("Connection", "Upgrade")
            self.end_headers()
            self.wfile.flush()
            while True:
                data = self.connection.recv(65536)
                if not data: break
                self.connection.sendall(data)
            self.close_connection = True
        else:
            self.send_bytes(b"hello\n")

    def do_HEAD(self):
        # The head a GET would get, without the body.
        parts = self.path.split("?")[0].strip("/").split("/")
        data = body(int(parts[1])) if parts[0] == "bytes" else b"hello\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()

    def do_POST(self):
        h = hashlib.sha256(); n = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b""): pass
                    break
                piece = self.rfile.read(size); self.rfile.readline()
                h.update(piece); n += len(piece)
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left > 0:
                piece = self.rfile.read(min(left, 65536))
                if not piece: break
                h.update(piece); n += len(piece); left -= len(piece)
        self.send_bytes(("%s %d\n" % (h.hexdigest(), n)).encode())

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 512
    allow_reuse_address = True

srv = Server((os.environ.get("ORIGIN_ADDRESS", "127.0.0.1"), int(os.environ.get("ORIGIN_PORT", "0"))), Handler)
args = sys.argv[1:]
if args and args[0] == "--tls":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    if "--tls10" in args:
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1
    if "--tls12" in args:
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(args[1], args[2])
    # Handshake in the request thread, not the accept loop, so one slow client cannot stall the others.
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
    orig = Handler.setup
    def setup(self):
        try:
            self.request.do_handshake()
        except (ssl.SSLError, OSError):
            self.request.close()
            raise
        orig(self)
    Handler.setup = setup
print("PORT %d" % srv.server_address[1], flush=True)
srv.serve_forever()
