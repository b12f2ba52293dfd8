"""Family 4: HTTP/2 floods through an intercepted h2 connection, with raw frames (no h2 library needed). The client
offers only h2 and the origin speaks HTTP/1.1, so the proxy's own h2 server session (nghttp2) takes the flood."""

import socket
import ssl
import struct
import time

import harness

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
PROTOCOL_ERROR = 1
RSS_GROWTH_LIMIT_KIB = 128 * 1024


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_int(value, prefix_bits, first=0):
    top = (1 << prefix_bits) - 1
    if value < top:
        return bytes([first | value])
    out = bytearray([first | top])
    value -= top
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def literal(name, value):
    """A literal header field without indexing, new name, no Huffman coding."""
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def request_block(host, path=b"/good", method=b"GET"):
    return (literal(b":method", method) + literal(b":scheme", b"https") + literal(b":authority", host)
            + literal(b":path", path))


class H2:
    """A raw h2 client connection through the proxy."""

    def __init__(self, env, host):
        self.host = host.encode()
        self.tls = env.proxy.tls_client(host, env.proxy_ca, alpn=("h2",), timeout=10)
        harness.ensure(self.tls.selected_alpn_protocol() == "h2",
                       "the proxy did not negotiate h2 (got %r)" % self.tls.selected_alpn_protocol())
        self.buf = b""
        self.tls.sendall(PREFACE + frame(SETTINGS, 0, 0))

    def close(self):
        try:
            self.tls.close()
        except OSError:
            pass

    def send(self, data):
        """Sends, returning False when the proxy stopped reading for 5 s (backpressure) or closed."""
        self.tls.settimeout(5)
        try:
            self.tls.sendall(data)
            return True
        except (socket.timeout, ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return False

    def frames(self, seconds):
        """Frames the proxy sends within `seconds` (None at the end when it closed)."""
        deadline = time.monotonic() + seconds
        while True:
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                kind, flags = self.buf[3], self.buf[4]
                stream = int.from_bytes(self.buf[5:9], "big") & 0x7FFFFFFF
                payload = self.buf[9:9 + n]
                self.buf = self.buf[9 + n:]
                yield kind, flags, stream, payload
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.tls.settimeout(left)
            try:
                chunk = self.tls.recv(1 << 20)
            except socket.timeout:
                return
            except (ConnectionResetError, ssl.SSLError, OSError):
                chunk = b""
            if not chunk:
                yield None
                return
            self.buf += chunk

    def outcome(self, seconds):
        """After an attack: 'goaway <code>' or 'closed' if the proxy ended the connection, else 'served' when a
        request on a new stream is answered, else a description of what happened."""
        if self.send(frame(PING, 0, 0, b"probe123") + frame(HEADERS, END_STREAM | END_HEADERS, 0x7FFFFFF1 - 0x1000,
                                                              request_block(self.host))):
            pass
        deadline = time.monotonic() + seconds
        for f in self.frames(seconds):
            if f is None:
                return "closed"
            kind, flags, stream, payload = f
            if kind == GOAWAY:
                return "goaway %d" % struct.unpack(">I", payload[4:8])[0]
            if kind == HEADERS and stream == 0x7FFFFFF1 - 0x1000:
                return "served"
            if time.monotonic() > deadline:
                break
        return "neither closed nor served within %d s" % seconds


def h2_sanity(env):
    c = H2(env, "sane.tls.test")
    try:
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, request_block(c.host)))
        for f in c.frames(10):
            harness.ensure(f is not None, "the proxy closed an h2 connection that made one request")
            if f[0] == HEADERS and f[2] == 1:
                return
        raise harness.CheckFailed("no response to one h2 request within 10 s")
    finally:
        c.close()


def flood(build, count, note):
    def check(env):
        rss_before = env.proxy.rss_kib()
        c = H2(env, "flood.tls.test")
        try:
            batch, sent, stopped = [], 0, False
            for i in range(count):
                batch.append(build(i))
                if len(batch) == 500 or i == count - 1:
                    if not c.send(b"".join(batch)):
                        stopped = True
                        break
                    sent += len(batch)
                    batch = []
            rss_after = env.proxy.rss_kib()
            result = c.outcome(10)
        finally:
            c.close()
        harness.ensure(rss_after - rss_before < RSS_GROWTH_LIMIT_KIB,
                       "the proxy's RSS grew by %d KiB during the %s" % (rss_after - rss_before, note))
        harness.ensure(result == "served" or result.startswith("goaway") or result == "closed",
                       "after %d %s: %s" % (sent, note, result))
        return "%d frames sent%s, then %s, RSS +%d KiB" % (sent, " (the proxy stopped reading)" if stopped else "",
                                                          result, rss_after - rss_before)

    return check


def rapid_reset(env):
    mark = env.tls_origin.mark()
    c = H2(env, "reset.tls.test")
    try:
        sent = 0
        for start in range(0, 4000, 200):
            data = b"".join(frame(HEADERS, END_STREAM | END_HEADERS, 2 * i + 1, request_block(c.host, b"/rr"))
                            + frame(RST_STREAM, 0, 2 * i + 1, struct.pack(">I", 8)) for i in range(start, start + 200))
            if not c.send(data):
                break
            sent += 200
        result = c.outcome(15)
    finally:
        c.close()
    reached = len(env.tls_origin.requests(mark))
    harness.ensure(result in ("served", "closed") or result.startswith("goaway"), "after %d rapid resets: %s"
                   % (sent, result))
    return "%d streams opened and reset, %d reached the origin, then %s" % (sent, reached, result)


def continuation_flood(env):
    rss_before = env.proxy.rss_kib()
    c = H2(env, "cont.tls.test")
    try:
        sent, ok = 0, c.send(frame(HEADERS, 0, 1, request_block(c.host)))
        while ok and sent < 20000:
            block = b"".join(frame(CONTINUATION, 0, 1, literal(b"x-flood-%d" % (sent + k), b"a" * 1000))
                             for k in range(200))
            ok = c.send(block)
            sent += 200 if ok else 0
        rss_after = env.proxy.rss_kib()
        result = c.outcome(10)
    finally:
        c.close()
    harness.ensure(rss_after - rss_before < RSS_GROWTH_LIMIT_KIB,
                   "the proxy's RSS grew by %d KiB during a CONTINUATION flood" % (rss_after - rss_before))
    harness.ensure(result.startswith("goaway") or result == "closed",
                   "after %d CONTINUATION frames (%d KiB of header block) the connection was %s, not ended"
                   % (sent, sent, result))
    return "ended after %d CONTINUATION frames: %s" % (sent, result)


def zero_window_update_connection(env):
    c = H2(env, "wu0.tls.test")
    try:
        c.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0)))
        seen = []
        for f in c.frames(5):
            if f is None:
                seen.append("close")
                break
            if f[0] == GOAWAY:
                code = struct.unpack(">I", f[3][4:8])[0]
                harness.ensure(code == PROTOCOL_ERROR, "GOAWAY with code %d, not PROTOCOL_ERROR" % code)
                return
            seen.append(f[0])
    finally:
        c.close()
    raise harness.CheckFailed("a zero-increment WINDOW_UPDATE on the connection was not a connection error "
                              "(RFC 9113 6.9: GOAWAY PROTOCOL_ERROR); frame types seen: %r" % seen[:10])


def zero_window_update_stream(env):
    c = H2(env, "wu0s.tls.test")
    try:
        block = request_block(c.host, b"/upload", b"POST")
        c.send(frame(HEADERS, END_HEADERS, 1, block) + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0)))
        for f in c.frames(5):
            if f is None:
                break
            kind, _, stream, payload = f
            if (kind == RST_STREAM and stream == 1) or kind == GOAWAY:
                code = struct.unpack(">I", payload[-4:] if kind == RST_STREAM else payload[4:8])[0]
                harness.ensure(code == PROTOCOL_ERROR, "answered with code %d, not PROTOCOL_ERROR" % code)
                return
    finally:
        c.close()
    raise harness.CheckFailed("a zero-increment WINDOW_UPDATE on a stream was not a stream error "
                              "(RFC 9113 6.9: RST_STREAM PROTOCOL_ERROR)")


def proxy_args(env):
    return []


CHECKS = [
    ("h2-sanity-one-request", h2_sanity, 20),
    ("settings-flood-20000", flood(lambda i: frame(SETTINGS, 0, 0, struct.pack(">HI", 3, 100)), 20000,
                                   "SETTINGS frames"), 40),
    ("ping-flood-20000", flood(lambda i: frame(PING, 0, 0, struct.pack(">Q", i)), 20000, "PING frames"), 40),
    ("empty-data-flood-20000", flood(lambda i: frame(DATA, 0, 0, b""), 20000, "DATA frames on stream 0"), 40),
    ("rst-stream-rapid-reset-4000", rapid_reset, 60),
    ("continuation-flood", continuation_flood, 60),
    ("zero-window-update-on-connection", zero_window_update_connection, 20),
    ("zero-window-update-on-stream", zero_window_update_stream, 20),
]
