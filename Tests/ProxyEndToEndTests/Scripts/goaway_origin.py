"""Usage: python3 goaway_origin.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

A tiny HTTP/2 origin written frame by frame, to send GOAWAY at a chosen moment (nghttpd cannot).
argv: CERT KEY BODY_FILE ANSWER WAIT. The first connection waits until WAIT requests arrived (at most 3 s), sends
GOAWAY with last-stream-id = its ANSWER-th stream, then answers those streams and no others. Later connections
answer every request. Every answer is BODY_FILE (kept below the 64 KiB windows, so no flow control is needed).
Prints "PORT n", then one "CONN i answered=k goaway_last=l" line per connection.
"""
import select, socket, ssl, struct, sys, threading, time

if __name__ == "__main__" and (len(sys.argv) < 6 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

CERT, KEY, BODY, ANSWER, WAIT = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read(), int(sys.argv[4]), int(sys.argv[5])
assert len(BODY) <= 16384

def frame(kind, flags, sid, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", sid) + payload

# HPACK: ":status: 200" is static entry 8; content-length (static 28) as a literal without indexing.
length = str(len(BODY)).encode()
RESPONSE = b"\x88" + b"\x0f\x0d" + bytes([len(length)]) + length

def answer(s, sid):
    s.sendall(frame(1, 0x4, sid, RESPONSE) + frame(0, 0x1, sid, BODY))

def read_exact(s, n):
    data = b""
    while len(data) < n:
        piece = s.recv(n - len(data))
        if not piece: return None
        data += piece
    return data

lock = threading.Lock()
count = [0]

def serve(raw):
    with lock:
        count[0] += 1; index = count[0]
    first = index == 1
    s = ctx.wrap_socket(raw, server_side=True)
    s.settimeout(10)
    answered, last, seen, started = 0, None, [], None
    deadline = time.time() + 20
    try:
        if read_exact(s, 24) is None: return
        s.sendall(frame(4, 0, 0, b""))
        while time.time() < deadline:
            if first and last is None and seen and (len(seen) >= WAIT or time.time() - started > 3):
                keep = sorted(seen)[:ANSWER]
                last = keep[-1]
                s.sendall(frame(7, 0, 0, struct.pack(">II", last, 0)))
                for sid in keep: answer(s, sid); answered += 1
            # Wait for a whole frame only when one has begun, so the GOAWAY moment is checked between frames.
            if not s.pending() and not select.select([s], [], [], 0.1)[0]: continue
            header = read_exact(s, 9)
            if header is None: break
            size, kind, flags = int.from_bytes(header[:3], "big"), header[3], header[4]
            sid = struct.unpack(">I", header[5:9])[0] & 0x7FFFFFFF
            payload = read_exact(s, size) if size else b""
            if payload is None: break
            if kind == 4 and not flags & 1: s.sendall(frame(4, 1, 0, b""))
            elif kind == 6 and not flags & 1: s.sendall(frame(6, 1, 0, payload))
            elif kind == 1 and first:
                seen.append(sid); started = started or time.time()
            elif kind == 1:
                answer(s, sid); answered += 1
    except (ConnectionError, ssl.SSLError, socket.timeout):
        pass
    finally:
        with lock:  # one whole line at a time: the threads would interleave their output
            print("CONN %d answered=%d goaway_last=%s requests=%d" % (index, answered, last, len(seen)), flush=True)
        s.close()

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
ctx.set_alpn_protocols(["h2"])
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(64)
print("PORT %d" % srv.getsockname()[1], flush=True)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
