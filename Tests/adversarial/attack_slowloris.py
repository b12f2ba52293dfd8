"""Family 5: slow clients. Each drips bytes and must be closed within the proxy's deadline: every request head
(from its first byte), the ClientHello after CONNECT, and a request body's progress (no byte for the limit) all
have `--client-timeout`, set short here so the four checks, run side by side, take seconds."""

import select
import socket
import ssl
import threading
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


class UploadHoldingOrigin:
    """An origin that reads a request head, then leaves its body unread for `hold` seconds (the proxy's write
    buffer fills and it stops reading the client), then reads it whole and answers 200 with the count."""

    def __init__(self, hold):
        self.hold = hold
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        sock, _ = self.listener.accept()
        with sock:
            sock.settimeout(LIMIT + GRACE + 15)
            buf = b""
            while b"\r\n\r\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                buf += chunk
            head, body = buf.split(b"\r\n\r\n", 1)
            length = int([line.split(b":")[1] for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")][0])
            time.sleep(self.hold)
            got = len(body)
            while got < length:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    return
                got += len(chunk)
            answer = b"%d" % got
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))


HELD_SIZE = 64 << 20
ORIGINS = {}


def body_held_by_slow_origin(env):
    """A client that sends as fast as it can while the proxy holds it unread (a slow origin): not its delay, so no
    408 after --client-timeout; the upload completes once the origin reads."""
    with env.proxy.connect(LIMIT + GRACE + 15) as sock:
        sock.sendall(b"POST http://held.plain.test/upload HTTP/1.1\r\nHost: held.plain.test\r\n"
                     b"Content-Length: %d\r\n\r\n" % HELD_SIZE)
        sent = []

        def upload():
            try:
                sock.sendall(b"u" * HELD_SIZE)
                sent.append(True)
            except OSError:
                pass

        uploader = threading.Thread(target=upload, daemon=True)
        uploader.start()
        # The response, or the close after a 408; the connection is kept alive after a 200.
        received = b""
        deadline = time.monotonic() + LIMIT + GRACE + 10
        while not received.endswith(b"%d" % HELD_SIZE) and time.monotonic() < deadline:
            if not select.select([sock], [], [], max(0, deadline - time.monotonic()))[0]:
                break
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        uploader.join(5)
    harness.ensure(not received.startswith(b"HTTP/1.1 408"),
                   "answered 408 while the proxy itself held the body unread for a slow origin")
    harness.ensure(received.startswith(b"HTTP/1.1 200") and received.endswith(b"%d" % HELD_SIZE),
                   "answered %r, not 200 with the whole upload" % received[:60])
    return "%d MiB upload held %d s by its origin (--client-timeout %d): 200, no 408" % (
        HELD_SIZE >> 20, ORIGINS["held"].hold, LIMIT)


def proxy_args(env):
    ORIGINS["held"] = UploadHoldingOrigin(LIMIT + 3)
    return ["--client-timeout", str(LIMIT), "--map", "held.plain.test=127.0.0.1:%d" % ORIGINS["held"].port]


CHECKS = [
    ("first-head-dripped", first_head, LIMIT + GRACE + 15),
    ("client-hello-dripped-after-connect", client_hello_dripped, LIMIT + GRACE + 15),
    ("intercepted-request-head-dripped", intercepted_head, LIMIT + GRACE + 15),
    ("request-body-dripped-slower-than-the-limit", body_dripped, LIMIT + GRACE + 15),
    ("request-body-held-by-a-slow-origin", body_held_by_slow_origin, LIMIT + GRACE + 15),
]
