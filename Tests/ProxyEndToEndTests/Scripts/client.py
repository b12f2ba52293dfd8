"""Usage: python3 client.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

The Python test client: concurrent downloads, keep-alive, resets, connection churn, Upgrade, http.client CONNECT.
Prints one JSON object.
"""
import hashlib, http.client, json, socket, ssl, struct, sys, threading, time
from concurrent.futures import ThreadPoolExecutor

# Test client. argv: PROXY_PORT PROXY_CA COMMAND ARGS...; prints one JSON object.

if __name__ == "__main__" and (len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)
PORT = int(sys.argv[1]); CA = sys.argv[2]; CMD = sys.argv[3]; ARGS = sys.argv[4:]
TIMEOUT = 30

def tls_ctx():
    ctx = ssl.create_default_context(cafile=CA)
    return ctx

def https_conn(host):
    c = http.client.HTTPSConnection("127.0.0.1", PORT, timeout=TIMEOUT, context=tls_ctx())
    c.set_tunnel(host, 443)
    return c

def plain_conn():
    return http.client.HTTPConnection("127.0.0.1", PORT, timeout=TIMEOUT)

def fetch(conn, target, host=None):
    conn.request("GET", target)
    r = conn.getresponse()
    data = r.read()
    want = r.getheader("X-Body-SHA256")
    return r.status, hashlib.sha256(data).hexdigest() == want, len(data)

HOSTS = {}

def download(kind, host, size):
    host = HOSTS.get(kind, host)
    try:
        if kind == "https":
            c = https_conn(host); st, ok, n = fetch(c, "/bytes/%d" % size)
        else:
            c = plain_conn(); st, ok, n = fetch(c, "http://%s/bytes/%d" % (host, size))
        c.close()
        return st == 200 and ok and n == size, "%s %s ok=%s n=%d" % (kind, st, ok, n)
    except Exception as e:
        return False, "%s %r" % (kind, e)

def result(**kw):
    print(json.dumps(kw)); sys.exit(0)

def many(jobs, workers):
    with ThreadPoolExecutor(workers) as pool:
        res = list(pool.map(lambda j: j(), jobs))
    fails = [m for ok, m in res if not ok]
    return len(res) - len(fails), fails[:5]

if CMD in ("concurrent", "reset", "churn", "keepalive"):
    # These take the HTTPS host and the plain host first.
    HOSTS["https"], HOSTS["plain"] = ARGS[0], ARGS[1]
    ARGS = [ARGS[0]] + ARGS[2:]

if CMD == "concurrent":
    size, host = int(ARGS[2]), ARGS[0]
    n = int(ARGS[1])
    barrier = threading.Barrier(n, timeout=TIMEOUT)
    def job(i):
        def run():
            try: barrier.wait()
            except threading.BrokenBarrierError: pass
            return download("https" if i % 2 == 0 else "plain", host, size)
        return run
    ok, fails = many([job(i) for i in range(n)], n)
    result(ok=ok, fails=fails)

elif CMD == "keepalive":
    host, count = ARGS[0], int(ARGS[1])
    out = {}
    for kind in ("https", "plain"):
        c = https_conn(HOSTS["https"]) if kind == "https" else plain_conn()
        socks, good = set(), 0
        for i in range(count):
            target = "/bytes/%d" % (1000 + i) if kind == "https" else "http://%s/bytes/%d" % (HOSTS["plain"], 1000 + i)
            st, ok, n = fetch(c, target)
            socks.add(id(c.sock)); good += (st == 200 and ok)
        out[kind] = {"good": good, "sockets": len(socks)}
        c.close()
    result(**out)

elif CMD == "reset":
    # ARGS: host side(client|upstream) others size
    host, side, others, size = ARGS[0], ARGS[1], int(ARGS[2]), int(ARGS[3])
    def resetter():
        try:
            if side == "client":
                c = https_conn(host)
                c.request("GET", "/bytes/%d" % size)
                r = c.getresponse(); r.read(100000)
                c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.sock.close()
                return True, "client reset sent"
            else:
                c = https_conn(host)
                c.request("GET", "/reset/%d" % size)
                r = c.getresponse()
                try:
                    data = r.read()
                    return len(data) < size, "upstream reset: got %d of %d" % (len(data), size)
                except (http.client.IncompleteRead, ConnectionError, ssl.SSLError) as e:
                    return True, "incomplete as expected: %r" % (e,)
        except Exception as e:
            return False, "resetter %r" % (e,)
    jobs = [resetter] + [(lambda i=i: download("https" if i % 2 else "plain", host, size)) for i in range(others)]
    with ThreadPoolExecutor(len(jobs)) as pool:
        res = list(pool.map(lambda j: j(), jobs))
    after = download("https", host, 1024)
    result(resetter=res[0], others_ok=sum(1 for ok, _ in res[1:] if ok), others_fail=[m for ok, m in res[1:] if not ok][:5], after=after)

elif CMD == "churn":
    # ARGS: host total tls_every workers
    host, total, tls_every, workers = ARGS[0], int(ARGS[1]), int(ARGS[2]), int(ARGS[3])
    def one(i):
        def run():
            if i % tls_every == 0: return download("https", host, 100)
            if i % 2 == 0: return download("plain", host, 100)
            # The shortest connection: the proxy answers a bad request itself (not GET /, which is the set-up page).
            try:
                s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
                s.sendall(b"GET /not-a-proxy-request HTTP/1.1\r\nHost: x\r\n\r\n"); data = s.recv(100); s.close()
                return data.startswith(b"HTTP/1.1 400"), "origin-form %r" % data[:20]
            except Exception as e:
                return False, "origin-form %r" % (e,)
        return run
    ok, fails = many([one(i) for i in range(total)], workers)
    result(ok=ok, fails=fails)

elif CMD == "upgrade":
    # ARGS: host mode(plain|https)
    host, mode = ARGS[0], ARGS[1]
    s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
    if mode == "https":
        s.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(), host.encode()))
        head = b""
        while b"\r\n\r\n" not in head: head += s.recv(1)
        s = tls_ctx().wrap_socket(s, server_hostname=host)
        target = b"/ws"
    else:
        target = b"http://%s/ws" % host.encode()
    s.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + host.encode() + b"\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        piece = s.recv(1)
        if not piece: break
        head += piece
    status = head.split(b"\r\n")[0].decode(errors="replace")
    payload = bytes(range(256)) * 64
    echoed = b""
    if " 101 " in status + " ":
        s.sendall(payload)
        while len(echoed) < len(payload):
            piece = s.recv(65536)
            if not piece: break
            echoed += piece
    s.close()
    result(status=status, echoed=echoed == payload, n=len(echoed))

elif CMD == "tunnel":
    # Python's http.client CONNECT via set_tunnel: ARGS host path
    c = https_conn(ARGS[0]); st, ok, n = fetch(c, ARGS[1])
    result(status=st, ok=ok, n=n, peer=c.sock.getpeercert()["issuer"][0][0][1])

elif CMD == "resume":
    # Client-leg session resumption: ARGS host other_host tls (1.3, 1.2-ticket or 1.2-id). Three connections, one
    # GET each: to host, to host again offering the first one's session, to other_host offering it too (which
    # must make a full handshake: a session is the host's). Prints whether each resumed and answered 200.
    host, other, mode = ARGS[0], ARGS[1], ARGS[2]
    ctx = tls_ctx()
    if mode != "1.3":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if mode == "1.2-id":
        ctx.options |= ssl.OP_NO_TICKET
    def connect(name, session):
        s = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
        s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (name, name)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            piece = s.recv(4096)
            if not piece: raise RuntimeError("proxy closed the CONNECT")
            head += piece
        t = ctx.wrap_socket(s, server_hostname=name, session=session)
        t.sendall(("GET /bytes/10 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name).encode())
        data = b""
        while True:
            piece = t.recv(65536)
            if not piece: break
            data += piece
        reused, session, version = t.session_reused, t.session, t.version()
        t.close()
        return {"resumed": reused, "status": int(data.split(b" ", 2)[1]) if data else 0, "version": version}, session
    first, session = connect(host, None)
    again, _ = connect(host, session)
    elsewhere, _ = connect(other, session)
    result(first=first, again=again, elsewhere=elsewhere)
