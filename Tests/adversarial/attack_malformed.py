"""Family 1: malformed request heads, a few hundred generated variants, each on its own connection. The proxy must
answer each with an HTTP/1 status or close, and forward nothing that is not strictly valid (the origin checks)."""

import random
import threading

import harness

INJECT = [b"\x00", b"\x01", b"\x0b", b"\x0c", b"\r", b"\n", b"\x7f", b"\x80", b"\xff", b" ", b"\t", b":", b"\"",
          b"(", b"@", b"\r\n ", b"\r\r\n"]


def base(i):
    host = b"m%d.plain.test" % i
    return [b"GET http://" + host + b"/p%d HTTP/1.1" % i, b"Host: " + host, b"X-Probe: value-%d" % i]


def join(lines, body=b""):
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def variants():
    out = []
    n = 0

    def add(raw):
        nonlocal n
        out.append(raw)
        n += 1

    # One hostile byte at each position of the head.
    for byte in INJECT:
        for where in range(8):
            lines = base(n)
            if where == 0:
                lines[0] = lines[0].replace(b"GET", b"G" + byte + b"ET")
            elif where == 1:
                lines[0] = lines[0].replace(b"/p", b"/p" + byte)
            elif where == 2:
                lines[0] = lines[0].replace(b"HTTP/1.1", b"HTTP/" + byte + b"1.1")
            elif where == 3:
                lines[2] = b"X-Pr" + byte + b"obe: v"
            elif where == 4:
                lines[2] = b"X-Probe: va" + byte + b"lue"
            elif where == 5:
                lines[2] = b"X-Probe" + byte + b": value"
            elif where == 6:
                lines[1] = byte + lines[1]
            else:
                lines[0] = lines[0].replace(b" HTTP", byte + b"HTTP")
            add(join(lines))
    # Invalid versions and request lines.
    for version in [b"HTTP/1.2", b"HTTP/2.0", b"HTTP/0.9", b"HTTP/1.10", b"HTTP/1", b"http/1.1", b"HTTP/ 1.1",
                    b"HTTP/1.1 extra", b"", b"HTTP/11", b"HTTP/1.1\x00", b"HTTPS/1.1", b"HTTP/-1.1"]:
        lines = base(n)
        lines[0] = lines[0][:-8] + version
        add(join(lines))
    for line in [b"", b" ", b"GET", b"GET  http://x.plain.test/ HTTP/1.1", b" GET http://x.plain.test/ HTTP/1.1",
                 b"GET http://x.plain.test/ HTTP/1.1 ", b"GET http:// HTTP/1.1", b"GET http://:80/ HTTP/1.1",
                 b"GET http://x.plain.test:99999/ HTTP/1.1", b"GET http://x.plain.test:-1/ HTTP/1.1",
                 b"GET http://user:pw@x.plain.test/ HTTP/1.1", b"GET * HTTP/1.1", b"GET / HTTP/1.1",
                 b"GET ftp://x.plain.test/ HTTP/1.1", b"CONNECT x.plain.test HTTP/1.1",
                 b"CONNECT :443 HTTP/1.1", b"CONNECT x.plain.test:0 HTTP/1.1", b"CONNECT [::1 HTTP/1.1",
                 b"\xff\xfe GET http://x.plain.test/ HTTP/1.1", b"GET http://x.plain.test/#frag HTTP/1.1",
                 b"GET http://x.plain.test\\@evil.plain.test/ HTTP/1.1", b"PRI * HTTP/2.0"]:
        add(join([line, b"Host: x.plain.test"]))
    # Huge lines and counts.
    add(join([b"GET http://h.plain.test/" + b"a" * 70000 + b" HTTP/1.1", b"Host: h.plain.test"]))
    add(join(base(n)[:2] + [b"X-Big: " + b"b" * 200000]))
    add(join(base(n)[:2] + [b"X-%d: v" % k for k in range(5000)]))
    add(join(base(n)[:2] + [b"X: " + b"v" * 8000] * 200))
    add(join(base(n)[:2] + [b"N" * 100000 + b": v"]))
    add(b"\r\n" * 5000 + join(base(n)))
    # Bad Content-Length and chunk sizes.
    for cl in [b"-1", b"+5", b"0x5", b"1e3", b"5 5", b"99999999999999999999999", b"", b"5\x00", b"\xd9\xa5",
               b"5, 6", b"abc", b" 5 ,"]:
        add(join(base(n)[:2] + [b"Content-Length: " + cl], b"hello"))
    for chunk in [b"zz\r\nhello\r\n0\r\n\r\n", b"-1\r\nhello\r\n0\r\n\r\n", b"0x5\r\nhello\r\n0\r\n\r\n",
                  b"ffffffffffffffffffff\r\nhello\r\n0\r\n\r\n", b"5\r\nhelloXX0\r\n\r\n", b"5\nhello\n0\n\n",
                  b"5;a=\"\r\n\"\r\nhello\r\n0\r\n\r\n", b"5\r\nhello\r\n0\r\nX-T\x00: 1\r\n\r\n",
                  b"5 \r\nhello\r\n0\r\n\r\n", b" 5\r\nhello\r\n0\r\n\r\n", b"5\rhello\r\n0\r\n\r\n",
                  b"0\r\n X: fold\r\n\r\n", b"8000000000000000\r\nhello\r\n"]:
        add(join([b"POST http://c%d.plain.test/ HTTP/1.1" % n, b"Host: c%d.plain.test" % n,
                  b"Transfer-Encoding: chunked"], chunk))
    # Seeded random mutations of a valid head: flips, insertions, deletions.
    rng = random.Random(23)
    for _ in range(150):
        raw = bytearray(join(base(n) + [b"Accept: */*", b"Content-Length: 3"], b"abc"))
        for _ in range(rng.randint(1, 4)):
            k = rng.randrange(len(raw))
            op = rng.randrange(3)
            if op == 0:
                raw[k] ^= 1 << rng.randrange(8)
            elif op == 1:
                raw[k:k] = bytes([rng.choice([0, 9, 10, 13, 32, 44, 58, 127, 255, rng.randrange(256)])])
            else:
                del raw[k]
        add(bytes(raw))
    return out


def send_variant(proxy, raw, outcomes, lock):
    try:
        with proxy.connect(5) as sock:
            try:
                sock.sendall(raw)
            except (BrokenPipeError, ConnectionResetError):
                pass
            data, _ = harness.recv_until_closed(sock, 3, limit=16384)
    except OSError as e:
        with lock:
            outcomes.append(("connect-error", str(e)))
        return
    kind = "no-answer"
    if data.startswith(b"HTTP/1.1 ") or data.startswith(b"HTTP/1.0 "):
        kind = data[9:12].decode("latin-1")
    elif data:
        kind = "non-http:%r" % data[:40]
    else:
        kind = "closed"
    with lock:
        outcomes.append((kind, raw[:80]))


def malformed_heads(env):
    proxy = env.proxy
    all_variants = variants()
    outcomes, lock = [], threading.Lock()
    pending = list(all_variants)

    def worker():
        while True:
            with lock:
                if not pending:
                    return
                raw = pending.pop()
            send_variant(proxy, raw, outcomes, lock)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    harness.ensure(proxy.alive(), "the proxy died during the variants: " + proxy.exit_description())
    odd = [o for o in outcomes if o[0].startswith("non-http") or o[0] == "connect-error"]
    harness.ensure(len(outcomes) == len(all_variants), "only %d of %d variants finished" % (len(outcomes),
                                                                                           len(all_variants)))
    harness.ensure(not odd, "%d variants got something other than HTTP/1 or a close: %r" % (len(odd), odd[:3]))


def pipelined_garbage(env):
    """Valid request, then garbage on the same connection: the second must not reach the origin malformed."""
    mark = env.origin.mark()
    with env.proxy.connect(5) as sock:
        sock.sendall(b"GET http://pg.plain.test/first HTTP/1.1\r\nHost: pg.plain.test\r\n\r\n"
                     b"GET http://pg.plain.test/second HTTP/1.1\r\nHost: pg.plain.test\r\nX\x00Y: z\r\n\r\n")
        data, _ = harness.recv_until_closed(sock, 3)
    harness.ensure(data.startswith(b"HTTP/1.1 200"), "the valid first request got %r" % data[:60])
    seen = [r[1] for r in env.origin.requests(mark, "pg.plain.test")]
    harness.ensure(seen == [b"/first"], "the origin received %r" % seen)


def proxy_args(env):
    return []


CHECKS = [
    ("malformed-heads-%d-variants" % len(variants()), malformed_heads, 150),
    ("valid-then-malformed-pipelined", pipelined_garbage, 20),
]
