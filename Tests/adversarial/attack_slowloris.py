"""Family 5: slow clients. Each drips bytes and must be closed within the proxy's deadline: every request head
(from its first byte), the ClientHello after CONNECT, and a request body's progress (no byte for the limit) all
have `--client-timeout`, set short here so the four checks, run side by side, take seconds."""

import select
import ssl
import time

import harness
from attack_tls import client_hello

LIMIT = 4  # seconds: the proxy's --client-timeout in this family
GRACE = 4
PARALLEL = True


def drip(sock, data, interval, seconds):
    """Sends `data` a byte at a time every `interval` seconds until the peer closes or `seconds` pass; returns the
    seconds until the close (None if still open) and what the peer sent."""
    start = time.monotonic()
    received = b""
    for i in range(len(data)):
        next_byte = start + i * interval
        while True:
            now = time.monotonic()
            if now - start > seconds:
                return None, received
            wait = max(0, min(next_byte, start + seconds) - now)
            ready = select.select([sock], [], [], wait)[0]
            if ready:
                try:
                    chunk = sock.recv(65536)
                except (ConnectionResetError, ssl.SSLError, OSError):
                    chunk = b""
                if not chunk:
                    return time.monotonic() - start, received
                received += chunk
                continue
            if time.monotonic() >= next_byte:
                break
        try:
            sock.sendall(data[i:i + 1])
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return time.monotonic() - start, received
    return None, received


def verdict(what, took, received):
    harness.ensure(took is not None, "%s: still open after %d s (the deadline is %d s)" % (what, LIMIT + GRACE,
                                                                                          LIMIT))
    return "closed after %.1f s%s" % (took, ", answered %r" % received[:12] if received else "")


def first_head(env):
    with env.proxy.connect(LIMIT + GRACE + 5) as sock:
        head = b"GET http://slow1.plain.test/ HTTP/1.1\r\nHost: slow1.plain.test\r\n" + b"X-Drip: " + b"d" * 200
        took, received = drip(sock, head, 1, LIMIT + GRACE)
    note = verdict("a first head dripped a byte a second", took, received)
    harness.ensure(received.startswith(b"HTTP/1.1 408"), "answered %r, not 408" % received[:40])
    return note


def client_hello_dripped(env):
    with env.proxy.connect_tunnel("slow2.tls.test", timeout=LIMIT + GRACE + 5) as sock:
        took, received = drip(sock, client_hello("slow2.tls.test"), 1, LIMIT + GRACE)
    return verdict("a ClientHello after CONNECT dripped a byte a second", took, received)


def intercepted_head(env):
    tls = env.proxy.tls_client("slow3.tls.test", env.proxy_ca, timeout=LIMIT + GRACE + 5)
    with tls:
        head = b"GET /slow HTTP/1.1\r\nHost: slow3.tls.test\r\nX-Drip: " + b"d" * 200
        took, received = drip(tls, head, 1, LIMIT + GRACE)
    return verdict("a request head inside an intercepted connection dripped a byte a second", took, received)


def body_dripped(env):
    with env.proxy.connect(LIMIT + GRACE + 5) as sock:
        sock.sendall(b"POST http://slow4.plain.test/upload HTTP/1.1\r\nHost: slow4.plain.test\r\n"
                     b"Content-Length: 100000\r\n\r\n")
        took, received = drip(sock, b"b" * 100, LIMIT + 2, LIMIT + GRACE)
    return verdict("a request body dripped a byte every %d s" % (LIMIT + 2), took, received)


def proxy_args(env):
    return ["--client-timeout", str(LIMIT)]


CHECKS = [
    ("first-head-dripped", first_head, LIMIT + GRACE + 15),
    ("client-hello-dripped-after-connect", client_hello_dripped, LIMIT + GRACE + 15),
    ("intercepted-request-head-dripped", intercepted_head, LIMIT + GRACE + 15),
    ("request-body-dripped-slower-than-the-limit", body_dripped, LIMIT + GRACE + 15),
]
