"""Usage: python3 closing_origin.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

An HTTP/2 origin that answers the first request with BODY_SIZE bytes, sends GOAWAY and closes the TCP connection
(after 0.3 s of reading), as servers do when they shut down. argv: CERT KEY BODY_SIZE. Prints "PORT n".
"""
import socket, ssl, struct, sys

if __name__ == "__main__" and (len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

CERT, KEY, SIZE = sys.argv[1], sys.argv[2], int(sys.argv[3])
BODY = bytes(i % 251 for i in range(SIZE))

def frame(kind, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", sid) + payload

def read_exact(s, n):
    data = b""
    while len(data) < n:
        piece = s.recv(n - len(data))
        if not piece: return None
        data += piece
    return data

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
ctx.set_alpn_protocols(["h2"])
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(8)
print("PORT %d" % srv.getsockname()[1], flush=True)
while True:
    raw, _ = srv.accept()
    try:
        s = ctx.wrap_socket(raw, server_side=True)
        s.settimeout(10)
        if read_exact(s, 24) is None: continue
        s.sendall(frame(4, 0, 0, b""))
        while True:
            header = read_exact(s, 9)
            if header is None: break
            size, kind, flags = int.from_bytes(header[:3], "big"), header[3], header[4]
            sid = struct.unpack(">I", header[5:9])[0] & 0x7FFFFFFF
            if size and read_exact(s, size) is None: break
            if kind == 4 and not flags & 1: s.sendall(frame(4, 1, 0, b""))
            elif kind == 1:
                # :status 200 (static 8), content-length (static 28) literal; DATA in 16 KiB frames (the
                # proxy's SETTINGS_MAX_FRAME_SIZE), within its 64 KiB stream window.
                length = str(len(BODY)).encode()
                out = frame(1, 0x4, sid, b"\x88\x0f\x0d" + bytes([len(length)]) + length)
                for i in range(0, len(BODY), 16384):
                    out += frame(0, 1 if i + 16384 >= len(BODY) else 0, sid, BODY[i:i + 16384])
                s.sendall(out + frame(7, 0, 0, struct.pack(">II", sid, 0)))
                break
        # Read what the proxy still sends for a moment before closing, as servers do: closing with unread input
        # would make the kernel send a TCP RST, which can destroy the response before the proxy reads it.
        s.settimeout(0.3)
        try:
            while s.recv(65536): pass
        except (socket.timeout, ssl.SSLError, ConnectionError):
            pass
        s.close()
    except (ConnectionError, ssl.SSLError, socket.timeout):
        pass
