"""Usage: python3 h2_client.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

A raw HTTP/2 client behind a CONNECT tunnel (no h2 library is installed: frames are written by hand).
argv: PROXY_PORT PROXY_CA HOST MODE; prints one JSON object.
MODE malformed-<kind>: TLS with ALPN h2, the preface and SETTINGS, then one broken frame; reports the GOAWAY.
MODE stall-one PATH1 PATH2: two GETs; stream 1 is never given window credit, stream 3 is (see below).
MODE small-window PATH: one GET with a 1000-byte stream window, read after a second (see below).
MODE upgrade: TLS offering h2 and http/1.1, then an HTTP/1.1 Upgrade to the echo origin; reports the echo.
"""
import json, socket, ssl, struct, sys, time

if __name__ == "__main__" and (len(sys.argv) < 5 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

PORT, CA, HOST, MODE = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]

def result(**kw):
    print(json.dumps(kw)); sys.exit(0)

def frame(kind, flags, sid, payload, length=None):
    n = len(payload) if length is None else length
    return struct.pack(">I", n)[1:] + bytes([kind, flags]) + struct.pack(">I", sid) + payload

def tunnel(alpn):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=10)
    s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (HOST.encode(), HOST.encode()))
    head = b""
    while b"\r\n\r\n" not in head:
        piece = s.recv(1)
        if not piece: result(error="proxy closed during CONNECT: %r" % head)
        head += piece
    ctx = ssl.create_default_context(cafile=CA)
    ctx.set_alpn_protocols(alpn)
    return ctx.wrap_socket(s, server_hostname=HOST)

def read_exact(s, n):
    data = b""
    while len(data) < n:
        piece = s.recv(n - len(data))
        if not piece: return None
        data += piece
    return data

BROKEN = {
    # SETTINGS whose length is not a multiple of 6 (RFC 9113 §6.5: FRAME_SIZE_ERROR).
    "settings-length": frame(4, 0, 0, b"\0" * 5),
    # DATA on stream 0 (§6.1: PROTOCOL_ERROR).
    "data-stream0": frame(0, 0, 0, b"abc"),
    # A frame header announcing 16 MiB, above SETTINGS_MAX_FRAME_SIZE (§4.2: FRAME_SIZE_ERROR).
    "oversized": frame(0, 0, 1, b"x" * 64, length=0xFFFFFF),
}

if MODE.startswith("malformed-"):
    t = tunnel(["h2"])
    alpn = t.selected_alpn_protocol()
    t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
    time.sleep(0.2)
    t.sendall(BROKEN[MODE[len("malformed-"):]])
    kinds, goaway, closed = [], None, False
    deadline = time.time() + 10
    try:
        while time.time() < deadline:
            header = read_exact(t, 9)
            if header is None: closed = True; break
            length = int.from_bytes(header[:3], "big")
            payload = read_exact(t, length)
            if payload is None: closed = True; break
            kinds.append(header[3])
            if header[3] == 7:
                goaway = {"last": struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF,
                          "code": struct.unpack(">I", payload[4:8])[0]}
    except (ConnectionError, ssl.SSLError, socket.timeout) as e:
        closed = not isinstance(e, socket.timeout)
    result(alpn=alpn, goaway=goaway, closed=closed, kinds=kinds)

elif MODE == "stall-one":
    # GET argv[5] on stream 1 and argv[6] on stream 3 with the RFC's default 64 KiB windows. The connection window
    # is credited for everything received; stream 1's window never is (a reader that stopped reading that
    # response), stream 3's is. Reports the bytes each stream got and whether stream 3 ended.
    STALLED, OTHER = sys.argv[5], sys.argv[6]
    def request(sid, path):
        def lit(index, value): return bytes([index, len(value)]) + value.encode()
        block = b"\x82\x87" + lit(4, path) + lit(1, HOST)
        return frame(1, 0x5, sid, block)
    t = tunnel(["h2"])
    t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + request(1, STALLED) + request(3, OTHER))
    got, ended, statuses = {1: 0, 3: 0}, set(), {}
    deadline = time.time() + 8
    t.settimeout(1)
    while time.time() < deadline and 3 not in ended:
        try:
            header = read_exact(t, 9)
        except socket.timeout:
            continue
        if header is None: break
        length, kind, flags = int.from_bytes(header[:3], "big"), header[3], header[4]
        sid = struct.unpack(">I", header[5:9])[0] & 0x7FFFFFFF
        payload = read_exact(t, length) if length else b""
        if payload is None: break
        if kind == 4 and not flags & 1: t.sendall(frame(4, 1, 0, b""))
        elif kind == 1: statuses[sid] = payload[:1].hex()
        elif kind == 0 and sid in got:
            got[sid] += length
            if length:
                credit = frame(8, 0, 0, struct.pack(">I", length))
                if sid == 3: credit += frame(8, 0, 3, struct.pack(">I", length))
                t.sendall(credit)
            if flags & 1: ended.add(sid)
        elif kind == 3 and sid in got: ended.add(sid)
    result(stalled=got[1], other=got[3], other_ended=3 in ended, statuses=statuses)

elif MODE == "small-window":
    # GET argv[5] with SETTINGS_INITIAL_WINDOW_SIZE 1000, wait a second (the origin has answered and closed by
    # then), then open the windows and read the response. Reports the bytes and how the stream ended.
    def lit(index, value): return bytes([index, len(value)]) + value.encode()
    t = tunnel(["h2"])
    t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, struct.pack(">HI", 4, 1000))
              + frame(1, 0x5, 1, b"\x82\x87" + lit(4, sys.argv[5]) + lit(1, HOST)))
    time.sleep(1)
    t.sendall(frame(8, 0, 1, struct.pack(">I", 1 << 20)) + frame(8, 0, 0, struct.pack(">I", 1 << 20)))
    got, ending = 0, "connection closed"
    while True:
        header = read_exact(t, 9)
        if header is None: break
        length, kind, flags = int.from_bytes(header[:3], "big"), header[3], header[4]
        payload = read_exact(t, length) if length else b""
        if payload is None: break
        if kind == 0:
            got += length
            if flags & 1: ending = "END_STREAM"; break
        elif kind == 3:
            ending = "RST_STREAM %d" % struct.unpack(">I", payload)[0]; break
    result(received=got, ending=ending)

elif MODE == "upgrade":
    t = tunnel(["h2", "http/1.1"])
    alpn = t.selected_alpn_protocol()
    t.sendall(b"GET /ws HTTP/1.1\r\nHost: " + HOST.encode() + b"\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        piece = t.recv(1)
        if not piece: break
        head += piece
    status = head.split(b"\r\n")[0].decode(errors="replace")
    payload = bytes(range(256)) * 64
    echoed = b""
    if " 101 " in status + " ":
        t.sendall(payload)
        while len(echoed) < len(payload):
            piece = t.recv(65536)
            if not piece: break
            echoed += piece
    t.close()
    result(alpn=alpn, status=status, echoed=echoed == payload, n=len(echoed))
