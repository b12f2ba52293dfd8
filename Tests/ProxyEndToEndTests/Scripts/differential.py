"""Usage: python3 differential.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

The differential origin and client (Python, on Debian's python3-h2): the same requests direct and through ATSProxy
on HTTP/1.1 and HTTP/2, including a WebSocket (Upgrade, or RFC 8441 extended CONNECT) and header values that are not
UTF-8. See DifferentialTests.
"""
# Differential origin and client: the same requests direct and through ATSProxy, on HTTP/1.1 and HTTP/2.
# origin: diff.py origin CERT KEY ALPNS            (prints "PORT n"; ALPNS: "h2,http/1.1", "http/1.1" or "h2")
# client: diff.py client HOST PORT CA PROTO [PROXYPORT] (PROTO h1 or h2; with PROXYPORT, CONNECT through the proxy)
# The client prints one JSON object: for each case, what an app would compare (status, chosen headers as hex
# bytes, body, or for the WebSocket whether it opened and what came back).
import base64, fcntl, hashlib, json, select, socket, ssl, struct, sys, termios, threading, time
import h2.config, h2.connection, h2.events, h2.settings

if __name__ == "__main__" and (len(sys.argv) < 5 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
LATIN = b"na\xefve caf\xe9"  # Latin-1, not UTF-8
WATCHED = [b"x-origin", b"x-latin", b"x-echo-latin", b"content-type", b"x-body-sha256", b"x-private", b"x-saw-private"]
UPLOAD = bytes(range(256)) * 120  # 30 720 bytes: within HTTP/2's initial window
EARLY_UPLOAD = bytes(range(256)) * 4096  # 1 MiB: still being sent when the early answer comes
EARLY = b"too large, answered early"
BIG_FIELDS = [(b"x-big-%d" % i, b"b" * 16000) for i in range(5)]  # an 80 KB header section, over the proxy's 64 KiB
CHUNKS = [b"first chunk, ", b"a longer second chunk " * 40, b"last"]

def h2cfg(client):
    return h2.config.H2Configuration(client_side=client, header_encoding=None, validate_inbound_headers=False,
        validate_outbound_headers=False, normalize_inbound_headers=False, normalize_outbound_headers=False)

# ---------------------------------------------------------------- origin
def respond_fields(path, headers, body=b""):
    """Status, fields and body for a plain request (both protocols)."""
    fields = [(b"x-origin", b"diff"), (b"content-type", b"text/plain")]
    if path == b"/echo":
        fields.append((b"x-body-sha256", hashlib.sha256(body).hexdigest().encode()))
        return 200, fields, b"got %d bytes" % len(body)
    if path == b"/latin":
        fields.append((b"x-latin", LATIN))
        echo = next((v for n, v in headers if n.lower() == b"x-latin"), b"")
        fields.append((b"x-echo-latin", echo))
    return 200, fields, b"body of " + path

def reset_after_sending(conn):
    """Ends the connection with a TCP reset (no close_notify), once the kernel has sent every queued byte."""
    for _ in range(500):
        if struct.unpack("i", fcntl.ioctl(conn.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0] == 0: break
        time.sleep(0.01)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()

def drain(conn):
    """Reads what the peer still sends, until it closes or is quiet for a second (at most 10 s)."""
    conn.settimeout(1)
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline and conn.recv(65536): pass
    except (OSError, ssl.SSLError):
        pass

def origin_h1(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk: return
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    method, path, _ = lines[0].split(b" ", 2)
    headers = [tuple(x.strip() for x in l.split(b":", 1)) for l in lines[1:]]
    get = lambda n: next((v for k, v in headers if k.lower() == n), None)
    if get(b"upgrade") and get(b"upgrade").lower() == b"websocket":
        key = get(b"sec-websocket-key") or b""
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Accept: " + accept + b"\r\nX-Origin: diff\r\n\r\n")
        if rest: conn.sendall(b"echo:" + rest)
        while True:
            chunk = conn.recv(65536)
            if not chunk: break
            conn.sendall(b"echo:" + chunk)
        return
    if path == b"/early":
        # A complete answer while the request body is still coming, and the connection's end; the body is drained
        # meanwhile (nginx's lingering close) so that the client reads the answer rather than a reset.
        conn.sendall(b"HTTP/1.1 413 Content Too Large\r\nX-Origin: diff\r\nContent-Type: text/plain\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(EARLY) + EARLY)
        drain(conn)
        return
    if path == b"/bighead":
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Origin: diff\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in BIG_FIELDS)
                     + b"Content-Length: 3\r\nConnection: close\r\n\r\nbig")
        return
    if path == b"/private":
        # RFC 9110 §7.6.1: the fields Connection names are hop-by-hop, both ways.
        saw = b"yes" if get(b"x-private") else b"no"
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Origin: diff\r\nConnection: x-private, close\r\nX-Private: 1\r\n"
                     b"X-Saw-Private: " + saw + b"\r\nContent-Length: 7\r\n\r\nprivate")
        return
    if path == b"/chunked":
        # Chunked whatever the request's version (HTTP/1.0 included), then a clean close (close_notify).
        out = b"HTTP/1.1 200 OK\r\nX-Origin: diff\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
        for c in CHUNKS: out += b"%x\r\n" % len(c) + c + b"\r\n"
        conn.sendall(out + b"0\r\n\r\n")
        conn.unwrap()
        return
    if path == b"/cut":
        # A response without a length that the origin ends with a reset: cut, not complete.
        conn.sendall(b"HTTP/1.1 200 OK\r\nX-Origin: diff\r\nContent-Type: text/plain\r\n\r\npartial body")
        reset_after_sending(conn)
        return
    body = rest
    if get(b"content-length"):
        n = int(get(b"content-length"))
        while len(body) < n:
            chunk = conn.recv(65536)
            if not chunk: return
            body += chunk
    elif get(b"transfer-encoding") and b"chunked" in get(b"transfer-encoding").lower():
        raw, body = rest, b""
        while True:
            while b"\r\n" not in raw:
                chunk = conn.recv(65536)
                if not chunk: return
                raw += chunk
            size_line, raw = raw.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            while len(raw) < size + 2:
                chunk = conn.recv(65536)
                if not chunk: return
                raw += chunk
            if size == 0: break
            body += raw[:size]
            raw = raw[size + 2:]
    status, fields, body = respond_fields(path, headers, body)
    out = b"HTTP/1.1 %d OK\r\n" % status
    for n, v in fields: out += n + b": " + v + b"\r\n"
    out += b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
    conn.sendall(out + body)

def origin_h2(conn):
    c = h2.connection.H2Connection(config=h2cfg(False))
    # RFC 8441: the setting in the server's first SETTINGS frame.
    c.local_settings = h2.settings.Settings(client=False, initial_values={
        h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL: 1})
    c.initiate_connection()
    conn.sendall(c.data_to_send())
    tunnels = set()
    pending = {}  # stream -> (headers, body so far) for requests with a body
    def answer(sid, headers, body):
        hdr = dict(headers)
        status, fields, out = respond_fields(hdr.get(b":path", b""), headers, body)
        c.send_headers(sid, [(b":status", str(status).encode())] + fields
                       + [(b"content-length", str(len(out)).encode())])
        c.send_data(sid, out, end_stream=True)
    while True:
        data = conn.recv(65536)
        if not data: return
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                hdr = dict(ev.headers)
                if b"host" in hdr and hdr[b"host"].lower() != hdr.get(b":authority", b"").lower():
                    # RFC 9113 §8.3.1: a host field naming another host than :authority is malformed.
                    c.reset_stream(ev.stream_id, error_code=1)
                    conn.sendall(c.data_to_send())
                    continue
                if hdr.get(b":path") == b"/cut":
                    c.send_headers(ev.stream_id, [(b":status", b"200"), (b"x-origin", b"diff"), (b"content-type", b"text/plain")])
                    c.send_data(ev.stream_id, b"partial body")
                    conn.sendall(c.data_to_send())
                    reset_after_sending(conn)
                    return
                path = hdr.get(b":path")
                if path == b"/early":
                    # RFC 9113 §8.1: a complete answer before the request's end, then RST_STREAM(NO_ERROR).
                    c.send_headers(ev.stream_id, [(b":status", b"413"), (b"x-origin", b"diff"), (b"content-type", b"text/plain"),
                                                  (b"content-length", str(len(EARLY)).encode())])
                    c.send_data(ev.stream_id, EARLY, end_stream=True)
                    c.reset_stream(ev.stream_id, error_code=0)
                    conn.sendall(c.data_to_send())
                    continue
                if path == b"/bighead":
                    c.send_headers(ev.stream_id, [(b":status", b"200"), (b"x-origin", b"diff")] + BIG_FIELDS, end_stream=False)
                    c.send_data(ev.stream_id, b"big", end_stream=True)
                    conn.sendall(c.data_to_send())
                    continue
                if path == b"/private":
                    # HTTP/2 has no Connection field: here x-private is an end-to-end field like any other.
                    c.send_headers(ev.stream_id, [(b":status", b"200"), (b"x-origin", b"diff"), (b"x-private", b"1"),
                                                  (b"x-saw-private", b"yes" if b"x-private" in hdr else b"no"),
                                                  (b"content-length", b"7")])
                    c.send_data(ev.stream_id, b"private", end_stream=True)
                    conn.sendall(c.data_to_send())
                    continue
                if path == b"/chunked":
                    # No chunked coding on HTTP/2: the same body in several DATA frames, without a length.
                    c.send_headers(ev.stream_id, [(b":status", b"200"), (b"x-origin", b"diff"), (b"content-type", b"text/plain")])
                    for i, chunk in enumerate(CHUNKS): c.send_data(ev.stream_id, chunk, end_stream=i == len(CHUNKS) - 1)
                    conn.sendall(c.data_to_send())
                    continue
                if hdr.get(b":method") == b"CONNECT" and hdr.get(b":protocol") == b"websocket":
                    tunnels.add(ev.stream_id)
                    c.send_headers(ev.stream_id, [(b":status", b"200"), (b"x-origin", b"diff")])
                elif ev.stream_ended is None:
                    pending[ev.stream_id] = (ev.headers, b"")
                else:
                    answer(ev.stream_id, ev.headers, b"")
            elif isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if ev.stream_id in tunnels and ev.data:
                    c.send_data(ev.stream_id, b"echo:" + ev.data)
                if ev.stream_id in pending:
                    h, b = pending[ev.stream_id]
                    pending[ev.stream_id] = (h, b + ev.data)
                if ev.stream_ended and ev.stream_id in tunnels:
                    c.end_stream(ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded) and ev.stream_id in pending:
                h, b = pending.pop(ev.stream_id)
                answer(ev.stream_id, h, b)
        conn.sendall(c.data_to_send())

def origin(cert, key, alpns):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(alpns.split(","))
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(64)
    print("PORT %d" % srv.getsockname()[1], flush=True)
    def serve(raw):
        try:
            conn = ctx.wrap_socket(raw, server_side=True)
            (origin_h2 if conn.selected_alpn_protocol() == "h2" else origin_h1)(conn)
        except (OSError, ssl.SSLError):
            pass
        finally:
            raw.close()
    while True:
        raw, _ = srv.accept()
        raw.settimeout(30)
        threading.Thread(target=serve, args=(raw,), daemon=True).start()

# ---------------------------------------------------------------- client
def connect(host, port, ca, proto, proxy, strict_eof=False):
    """With `strict_eof`, a TLS connection that ends without close_notify raises (a cut) instead of reading as an end."""
    if proxy:
        s = socket.create_connection(("127.0.0.1", proxy), timeout=20)
        s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(), host.encode()))
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(1)
            if not b: raise OSError("proxy closed")
            head += b
        assert head.startswith(b"HTTP/1.1 200"), head
    else:
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.set_alpn_protocols(["h2"] if proto == "h2" else ["http/1.1"])
    t = ctx.wrap_socket(s, server_hostname=host, suppress_ragged_eofs=not strict_eof)
    return t

def watched(fields):
    return {n.decode(): v.hex() for n, v in fields if n.lower() in WATCHED}

def h1_request(t, host, path, extra=b"", method=b"GET", body=b""):
    t.sendall(method + b" " + path + b" HTTP/1.1\r\nHost: " + host.encode() + b"\r\n" + extra
              + b"Connection: close\r\n\r\n" + body)
    data = b""
    while True:
        chunk = t.recv(65536)
        if not chunk: break
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.split(b"\r\n")
    fields = [tuple(x.strip() for x in l.split(b":", 1)) for l in lines[1:]]
    fields = [(n.lower(), v) for n, v in fields]
    return int(lines[0].split(b" ")[1]), fields, body

def h2_exchange(t, headers, send=None, body_out=None):
    """One request on a new h2 connection. With `send`, an extended CONNECT: sent only once the server's SETTINGS
    allow it, then `send` goes as DATA and the echo is read back."""
    c = h2.connection.H2Connection(config=h2cfg(True))
    c.initiate_connection(); t.sendall(c.data_to_send())
    status, fields, body, sid = None, [], b"", None
    want_connect = send is not None
    if not want_connect:
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, headers, end_stream=body_out is None)
        if body_out is not None:
            for i in range(0, len(body_out), 16384):
                c.send_data(sid, body_out[i:i + 16384], end_stream=i + 16384 >= len(body_out))
        t.sendall(c.data_to_send())
    while True:
        data = t.recv(65536)
        if not data: break
        done = False
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.RemoteSettingsChanged) and want_connect and sid is None:
                if c.remote_settings.get(h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL, 0) != 1:
                    return None, [], b"no SETTINGS_ENABLE_CONNECT_PROTOCOL"
                sid = c.get_next_available_stream_id()
                c.send_headers(sid, headers, end_stream=False)
            elif isinstance(ev, h2.events.ResponseReceived):
                fields = [(n.lower(), v) for n, v in ev.headers if not n.startswith(b":")]
                status = int(dict(ev.headers)[b":status"])
                if want_connect and status == 200: c.send_data(sid, send)
            elif isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                body += ev.data
                if want_connect and len(body) >= len(send) + 5: done = True
                if ev.stream_ended: done = True
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        t.sendall(c.data_to_send())
        if done: break
    return status, fields, body

def read_to_end(t):
    """Everything read until the connection's end, and how it ended: "closed" (cleanly), "cut" (a reset, or on a
    strict socket TLS without close_notify) or "open" (still open at the socket's timeout)."""
    data = b""
    try:
        while True:
            chunk = t.recv(65536)
            if not chunk: return data, "closed"
            data += chunk
    except TimeoutError:
        return data, "open"
    except (ConnectionResetError, ssl.SSLError):
        return data, "cut"

def h1_ending(t, host, path):
    """Status and how a response read to the connection's end ended: "complete" (a clean end) or the error."""
    t.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: " + host.encode() + b"\r\nConnection: close\r\n\r\n")
    data, ending = read_to_end(t)
    ending = "complete" if ending == "closed" else ending
    status = int(data.split(b" ")[1]) if data.startswith(b"HTTP/1.") else None
    return status, ending

def h2_ending(t, headers):
    """Status and how an h2 response ended: "complete" (END_STREAM) or "cut" (RST_STREAM, or the connection lost)."""
    c = h2.connection.H2Connection(config=h2cfg(True))
    c.initiate_connection()
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, headers, end_stream=True)
    t.sendall(c.data_to_send())
    status = None
    while True:
        try:
            data = t.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            return status, "cut"
        if not data: return status, "cut"
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived): status = int(dict(ev.headers)[b":status"])
            elif isinstance(ev, h2.events.DataReceived): c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.StreamEnded): return status, "complete"
            elif isinstance(ev, (h2.events.StreamReset, h2.events.ConnectionTerminated)): return status, "cut"
        try:
            t.sendall(c.data_to_send())
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            pass  # the peer is gone: what it sent before its reset is still to be read

def h1_early(t, host):
    """A 1 MiB POST whose answer comes early: the body is sent while the answer is read, until the answer is whole
    (its Content-Length), the connection ends, or sending fails (the reading goes on)."""
    t.sendall(b"POST /early HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: application/octet-stream\r\n"
              b"Content-Length: %d\r\n\r\n" % len(EARLY_UPLOAD))
    t.setblocking(False)
    sent, data, sending, ending = 0, b"", True, "timeout"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if sending and sent < len(EARLY_UPLOAD):
            try:
                sent += t.send(EARLY_UPLOAD[sent:sent + 16384])
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
                pass
            except (OSError, ssl.SSLError):
                sending = False
        try:
            chunk = t.recv(65536)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            writing = [t] if sending and sent < len(EARLY_UPLOAD) else []
            select.select([t], writing, [], 0.5)
            continue
        except (OSError, ssl.SSLError):
            ending = "reset"
            break
        if not chunk:
            ending = "closed"
            break
        data += chunk
        if b"\r\n\r\n" in data:
            head, body = data.split(b"\r\n\r\n", 1)
            length = next((int(l.split(b":", 1)[1]) for l in head.split(b"\r\n")[1:] if l.lower().startswith(b"content-length:")), None)
            if length is not None and len(body) >= length:
                ending = "complete"
                break
    head, body = data.split(b"\r\n\r\n", 1) if b"\r\n\r\n" in data else (data, b"")
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.") else None
    return {"status": status, "body": body.decode("latin-1"), "ending": ending}

def h2_early(t, host):
    """A 1 MiB POST on HTTP/2 whose answer comes early: DATA as the windows allow until the stream ends or is reset."""
    c = h2.connection.H2Connection(config=h2cfg(True))
    c.initiate_connection()
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(b":method", b"POST"), (b":scheme", b"https"), (b":authority", host.encode()), (b":path", b"/early"),
                         (b"content-length", str(len(EARLY_UPLOAD)).encode())])
    t.sendall(c.data_to_send())
    sent, status, body, ending, sending = 0, None, b"", "timeout", True
    while True:
        while sending and sent < len(EARLY_UPLOAD):
            n = min(c.local_flow_control_window(sid), c.max_outbound_frame_size, len(EARLY_UPLOAD) - sent)
            if n <= 0: break
            c.send_data(sid, EARLY_UPLOAD[sent:sent + n], end_stream=sent + n == len(EARLY_UPLOAD))
            sent += n
        try:
            t.sendall(c.data_to_send())
            data = t.recv(65536)
        except (OSError, ssl.SSLError):
            return {"status": status, "body": body.decode("latin-1"), "ending": "reset"}
        if not data:
            return {"status": status, "body": body.decode("latin-1"), "ending": "closed"}
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                status = int(dict(ev.headers)[b":status"])
            elif isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                body += ev.data
            elif isinstance(ev, h2.events.StreamEnded):
                return {"status": status, "body": body.decode("latin-1"), "ending": "complete"}
            elif isinstance(ev, (h2.events.StreamReset, h2.events.ConnectionTerminated)):
                return {"status": status, "body": body.decode("latin-1"), "ending": "reset"}

def h2_pair(t, host):
    """Two requests on one h2 connection: /bighead (a header section over 64 KiB) first, then /plain. Each stream's
    status, watched fields, body and ending ("complete", "reset", or "lost" when the connection went first)."""
    c = h2.connection.H2Connection(config=h2cfg(True))
    c.decoder.max_header_list_size = 1 << 20  # hpack's default (64 KiB) would refuse the large section itself
    c.initiate_connection()
    streams = {}
    for path in (b"/bighead", b"/plain"):
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", host.encode()), (b":path", path)],
                       end_stream=True)
        streams[sid] = {"status": None, "fields": {}, "body": b"", "ending": "lost"}
    t.sendall(c.data_to_send())
    open_streams = set(streams)
    while open_streams:
        try:
            data = t.recv(65536)
        except (OSError, ssl.SSLError):
            break
        if not data: break
        for ev in c.receive_data(data):
            s = streams.get(getattr(ev, "stream_id", None))
            if isinstance(ev, h2.events.ResponseReceived):
                s["status"] = int(dict(ev.headers)[b":status"])
                s["fields"] = watched([(n.lower(), v) for n, v in ev.headers if not n.startswith(b":")])
            elif isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                s["body"] += ev.data
            elif isinstance(ev, h2.events.StreamEnded):
                s["ending"] = "complete"; open_streams.discard(ev.stream_id)
            elif isinstance(ev, h2.events.StreamReset):
                s["ending"] = "reset"; open_streams.discard(ev.stream_id)
            elif isinstance(ev, h2.events.ConnectionTerminated):
                open_streams.clear()
        try:
            t.sendall(c.data_to_send())
        except (OSError, ssl.SSLError):
            break
    big, plain = (streams[k] for k in sorted(streams))
    for s in (big, plain): s["body"] = s["body"].decode("latin-1")
    return {"status": big["status"], "ending": big["ending"]}, plain

def h10_request(t, host, path):
    """An HTTP/1.0 GET read to the connection's end: status, the body as decoded (de-chunked if it came chunked), how
    it ended ("closed" cleanly, "cut", or "open" when the connection stayed open), and whether it came chunked."""
    t.sendall(b"GET " + path + b" HTTP/1.0\r\nHost: " + host.encode() + b"\r\n\r\n")
    data, ending = read_to_end(t)
    head, raw = data.split(b"\r\n\r\n", 1) if b"\r\n\r\n" in data else (data, b"")
    lines = head.split(b"\r\n")
    chunked = any(l.lower().startswith(b"transfer-encoding:") and b"chunked" in l.lower() for l in lines[1:])
    body = raw
    if chunked:
        body = b""
        while raw:
            size_line, raw = raw.split(b"\r\n", 1)
            size = int(size_line.split(b";")[0], 16)
            if size == 0: break
            body, raw = body + raw[:size], raw[size + 2:]
    status = int(lines[0].split(b" ")[1]) if head.startswith(b"HTTP/1.") else None
    return {"status": status, "body": body.decode("latin-1"), "ending": ending}, chunked

def client(host, port, ca, proto, proxy):
    out = {}
    # 1. a plain GET
    t = connect(host, port, ca, proto, proxy)
    if proto == "h1":
        st, f, b = h1_request(t, host, b"/plain")
    else:
        st, f, b = h2_exchange(t, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", host.encode()), (b":path", b"/plain")])
    out["plain"] = {"status": st, "fields": watched(f), "body": b.decode("latin-1")}
    t.close()
    # 2. header values that are not UTF-8, both ways
    t = connect(host, port, ca, proto, proxy)
    if proto == "h1":
        st, f, b = h1_request(t, host, b"/latin", b"X-Latin: " + LATIN + b"\r\n")
    else:
        st, f, b = h2_exchange(t, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", host.encode()),
                                   (b":path", b"/latin"), (b"x-latin", LATIN)])
    out["latin"] = {"status": st, "fields": watched(f), "body": b.decode("latin-1")}
    t.close()
    # 3. a request body (a POST)
    t = connect(host, port, ca, proto, proxy)
    if proto == "h1":
        st, f, b = h1_request(t, host, b"/echo", b"Content-Length: %d\r\n" % len(UPLOAD), method=b"POST", body=UPLOAD)
    else:
        st, f, b = h2_exchange(t, [(b":method", b"POST"), (b":scheme", b"https"), (b":authority", host.encode()),
                                   (b":path", b"/echo")], body_out=UPLOAD)
    out["post"] = {"status": st, "fields": watched(f), "body": b.decode("latin-1")}
    t.close()
    # 4. a WebSocket: HTTP/1.1 Upgrade, or RFC 8441 extended CONNECT on HTTP/2
    t = connect(host, port, ca, proto, proxy)
    payload = b"hello over websocket"
    if proto == "h1":
        key = base64.b64encode(b"0123456789abcdef")
        t.sendall(b"GET /ws HTTP/1.1\r\nHost: " + host.encode() + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = t.recv(65536)
            if not chunk: break
            data += chunk
        head, rest = data.split(b"\r\n\r\n", 1) if b"\r\n\r\n" in data else (data, b"")
        status = int(head.split(b" ")[1]) if head else 0
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        opened = status == 101 and (b"sec-websocket-accept: " + accept.lower()) in head.lower()
        echo = rest
        if opened:
            t.sendall(payload)
            while len(echo) < len(payload) + 5:
                chunk = t.recv(65536)
                if not chunk: break
                echo += chunk
        out["websocket"] = {"opened": opened, "status": status, "echo": echo.decode("latin-1")}
    else:
        st, f, b = h2_exchange(t, [(b":method", b"CONNECT"), (b":protocol", b"websocket"), (b":scheme", b"https"),
                                   (b":authority", host.encode()), (b":path", b"/ws"), (b"sec-websocket-version", b"13")],
                               send=payload)
        out["websocket"] = {"opened": st == 200, "status": st, "echo": b.decode("latin-1")}
    t.close()
    # 5. a response without a length, cut by the origin's reset: the client must see the cut
    t = connect(host, port, ca, proto, proxy, strict_eof=True)
    if proto == "h1":
        st, ending = h1_ending(t, host, b"/cut")
    else:
        st, ending = h2_ending(t, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", host.encode()), (b":path", b"/cut")])
    out["cut"] = {"status": st, "ending": ending}
    t.close()
    # 6. HTTP/2 only: :authority and a host field that names another host, malformed (RFC 9113 §8.3.1) on every path
    if proto == "h2":
        t = connect(host, port, ca, proto, proxy)
        st, ending = h2_ending(t, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", host.encode()),
                                   (b":path", b"/plain"), (b"host", b"other.test")])
        out["authority"] = {"status": st, "ending": ending}
        t.close()
    # 7. a complete early answer (413) while a 1 MiB body is still being sent; four times, as a lost answer is a race
    out["early"] = []
    for _ in range(4):
        t = connect(host, port, ca, proto, proxy)
        out["early"].append(h1_early(t, host) if proto == "h1" else h2_early(t, host))
        t.close()
    # 8. HTTP/2 only: on one connection a response whose header section is over the proxy's limit, and another
    if proto == "h2":
        t = connect(host, port, ca, proto, proxy)
        out["bighead"], out["other"] = h2_pair(t, host)
        t.close()
    # 9. Connection-named fields (hop-by-hop on HTTP/1.1): X-Private in the response, and on HTTP/1.1 in the request
    t = connect(host, port, ca, proto, proxy)
    if proto == "h1":
        st, f, b = h1_request(t, host, b"/private", b"Connection: x-private\r\nX-Private: 1\r\n")
    else:
        st, f, b = h2_exchange(t, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", host.encode()), (b":path", b"/private")])
    out["private"] = {"status": st, "fields": watched(f), "body": b.decode("latin-1")}
    t.close()
    # 10. HTTP/1.1 only: an HTTP/1.0 request whose answer the origin sends chunked
    if proto == "h1":
        t = connect(host, port, ca, proto, proxy, strict_eof=True)
        out["http10"], out["http10_chunked"] = h10_request(t, host, b"/chunked")
        t.close()
    print(json.dumps(out))

if __name__ == "__main__":
    if sys.argv[1] == "origin":
        origin(*sys.argv[2:5])
    else:
        host, port, ca, proto = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
        client(host, port, ca, proto, int(sys.argv[6]) if len(sys.argv) > 6 else None)
