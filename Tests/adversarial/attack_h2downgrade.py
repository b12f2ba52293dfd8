"""Family: HTTP/2 clients that abuse the proxy's translation and multiplexing (issue 30, items 1-6, 12, 13).

Hostile h2 clients through an intercepted connection, relayed to an HTTP/1.1 origin (`LaneOrigin`: the proxy's
lanes) or to an h2 origin (`H2Origin`: raw frames, its behaviour picked by the SNI's first label). Each check
asserts a bound: the proxy's memory (VmRSS), the upstream connections open at the origin, the upstream streams the
origin still holds, the deadlines. The family's proxy runs with short deadlines (--client-timeout 2,
--response-timeout 3). Python 3 standard library only."""

import os
import socket
import ssl
import struct
import threading
import time

import harness
from attack_h2flood import (ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, H2, HEADERS, PING, RST_STREAM,
                            SETTINGS, WINDOW_UPDATE, frame, literal, request_block)

CLIENT_TIMEOUT = 2
RESPONSE_TIMEOUT = 3
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
NO_ERROR, FLOW_CONTROL_ERROR, CANCEL, ENHANCE_YOUR_CALM = 0, 3, 8, 11
INITIAL_WINDOW_SIZE = 4


def leaf_files(env):
    pki = os.path.join(env.folder, "pki")
    return os.path.join(pki, "leaf.pem"), os.path.join(pki, "leaf.key")


# ---------------------------------------------------------------------------------------------------------------
# An HTTP/1.1 origin for the lanes: counts the connections open at once, by host.


class LaneOrigin:
    """`/big/<KiB>`: a body of that size. `/hold`: reads the request (and any body) and never answers.
    `/double`: two responses in one write. `/endless`: a body that never ends, bytes counted in `sent`.
    `/noread`: reads the head, then nothing until `noread_release` is set, and closes."""

    def __init__(self, tls_files):
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(*tls_files)
        self.context.set_alpn_protocols(["http/1.1"])
        self.lock = threading.Lock()
        self.open = 0
        self.peak = 0
        self.accepted = 0
        self.served = 0
        self.sent = 0
        self.noread_release = threading.Event()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1024)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def reset_counts(self):
        with self.lock:
            self.peak = self.open
            self.served = 0
            self.sent = 0
            self.accepted = 0

    def _accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                self.open += 1
                self.accepted += 1
                self.peak = max(self.peak, self.open)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, raw):
        sock = raw
        try:
            raw.settimeout(60)
            sock = self.context.wrap_socket(raw, server_side=True)
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                target = head.split(b" ")[1].decode("latin-1")
                if target == "/noread":
                    # Reads nothing more until the check says, then goes (unread bytes: the kernel resets).
                    self.noread_release.wait(30)
                    raw.close()
                    return
                if target == "/hold":
                    while sock.recv(65536):
                        pass
                    return
                with self.lock:
                    self.served += 1
                if target.startswith("/big/"):
                    body = b"b" * (int(target[5:]) << 10)
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                elif target == "/double":
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst"
                                 b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra")
                elif target == "/endless":
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (500 << 20))
                    piece = b"e" * 65536
                    while True:
                        sock.sendall(piece)
                        with self.lock:
                            self.sent += len(piece)
                else:
                    sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        except (OSError, ssl.SSLError, ValueError, IndexError):
            pass
        finally:
            with self.lock:
                self.open -= 1
            try:
                sock.close()
            except OSError:
                pass


# ---------------------------------------------------------------------------------------------------------------
# An h2 origin of raw frames. Modes, by the SNI's first label:
#   hold-*:    answers nothing; counts the HEADERS (requests) and RST_STREAM frames it receives.
#   early-*:   answers each request at once with 413 and a body, then RST_STREAM(NO_ERROR) (RFC 9113 §8.1).
#   bighead-*: answers its first request with a header section over 64 KiB, every later one with 200 "ok".
#   refuse-*:  answers a connection's first request with 200 "ok" and refuses the second with GOAWAY (last stream
#              id: the first), as nginx does after `http2_max_requests`.


class H2Origin:
    def __init__(self, tls_files):
        self.files = tls_files
        self.lock = threading.Lock()
        self.requests = {}
        self.resets = {}
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(256)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def counts(self, mode):
        with self.lock:
            return self.requests.get(mode, 0), self.resets.get(mode, 0)

    def _accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, raw):
        names = []
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*self.files)
        ctx.set_alpn_protocols(["h2"])
        ctx.sni_callback = lambda obj, name, c: names.append(name or "")
        sock = raw
        try:
            raw.settimeout(60)
            sock = ctx.wrap_socket(raw, server_side=True)
            mode = (names[0] if names else "").split(".")[0]
            sock.sendall(frame(SETTINGS, 0, 0))
            buf, answered = b"", 0
            while len(buf) < len(PREFACE):
                chunk = sock.recv(65536)
                if not chunk:
                    return
                buf += chunk
            buf = buf[len(PREFACE):]
            while True:
                while len(buf) >= 9 and len(buf) >= 9 + int.from_bytes(buf[:3], "big"):
                    n = int.from_bytes(buf[:3], "big")
                    kind, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                    buf = buf[9 + n:]
                    if kind == SETTINGS and not flags & ACK:
                        sock.sendall(frame(SETTINGS, ACK, 0))
                    elif kind == HEADERS:
                        with self.lock:
                            self.requests[mode] = self.requests.get(mode, 0) + 1
                        self._answer(sock, mode, stream, answered)
                        answered += 1
                    elif kind == RST_STREAM:
                        with self.lock:
                            self.resets[mode] = self.resets.get(mode, 0) + 1
                chunk = sock.recv(65536)
                if not chunk:
                    return
                buf += chunk
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass

    @staticmethod
    def _answer(sock, mode, stream, answered):
        if mode == "early":
            body = b"too large, stop sending" * 40
            block = literal(b":status", b"413") + literal(b"content-length", str(len(body)).encode())
            sock.sendall(frame(HEADERS, END_HEADERS, stream, block) + frame(DATA, END_STREAM, stream, body)
                         + frame(RST_STREAM, 0, stream, struct.pack(">I", NO_ERROR)))
        elif mode == "bighead":
            if answered == 0:
                block = literal(b":status", b"200") + b"".join(
                    literal(b"x-big-%d" % i, b"h" * 8000) for i in range(9))
                pieces = [block[i:i + 16384] for i in range(0, len(block), 16384)]
                frames = frame(HEADERS, 0, stream, pieces[0])
                for k, piece in enumerate(pieces[1:]):
                    frames += frame(CONTINUATION, END_HEADERS if k == len(pieces) - 2 else 0, stream, piece)
                sock.sendall(frames + frame(DATA, END_STREAM, stream, b"big"))
            else:
                sock.sendall(frame(HEADERS, END_HEADERS, stream, literal(b":status", b"200")
                                   + literal(b"content-length", b"2")) + frame(DATA, END_STREAM, stream, b"ok"))
        elif mode == "refuse":
            if answered == 0:
                sock.sendall(frame(HEADERS, END_HEADERS, stream, literal(b":status", b"200")
                                   + literal(b"content-length", b"2")) + frame(DATA, END_STREAM, stream, b"ok"))
            else:
                sock.sendall(frame(GOAWAY, 0, 0, struct.pack(">II", stream - 2, NO_ERROR)))


# ---------------------------------------------------------------------------------------------------------------
# Helpers.

ORIGINS = {}
LANE_HOSTS = ["held.tls.test", "window.tls.test", "resets.tls.test", "stall.tls.test", "silent.tls.test", "twice.tls.test",
              "endless.tls.test", "slowbody.tls.test"]
H2_HOSTS = ["hold.tls.test", "early.tls.test", "bighead.tls.test", "holdbody.tls.test", "refuse.tls.test"]


def proxy_args(env):
    ORIGINS["lane"] = LaneOrigin(leaf_files(env))
    ORIGINS["h2"] = H2Origin(leaf_files(env))
    # `ios`: an HTTP/1.1 client's requests reach the h2 origin translated, as URLSession's connection would.
    args = ["--client-timeout", str(CLIENT_TIMEOUT), "--response-timeout", str(RESPONSE_TIMEOUT),
            "--upstream-alpn", "ios"]
    for host in LANE_HOSTS:
        args += ["--map", "%s=127.0.0.1:%d" % (host, ORIGINS["lane"].port)]
    for host in H2_HOSTS:
        args += ["--map", "%s=127.0.0.1:%d" % (host, ORIGINS["h2"].port)]
    return args


def settings(initial_window=None):
    payload = b"" if initial_window is None else struct.pack(">HI", 4, initial_window)
    return frame(SETTINGS, 0, 0, payload)


def open_h2(env, host, initial_window=None):
    c = H2(env, host)
    if initial_window is not None:
        c.send(settings(initial_window))
    return c


def wait_for(condition, seconds, step=0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(step)
    return condition()


def collect(c, seconds, until=None):
    """Frames (kind, flags, stream, payload) the proxy sends within `seconds`, 'closed' at the end if it closed;
    stops early once `until(frames)` holds."""
    seen = []
    for f in c.frames(seconds):
        seen.append("closed" if f is None else f)
        if f is None or (until and until(seen)):
            break
    return seen


def goaway_code(seen):
    for f in seen:
        if f != "closed" and f[0] == GOAWAY:
            return struct.unpack(">I", f[3][4:8])[0]
    return None


# HPACK's static table entries for :status, and the Huffman codes of the digits (RFC 7541 appendices A, B).
STATIC_STATUS = {8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}
HUFFMAN_DIGITS = {"00000": "0", "00001": "1", "00010": "2", "011001": "3", "011010": "4", "011011": "5",
                  "011100": "6", "011101": "7", "011110": "8", "011111": "9"}


def status_of(block):
    """The :status of a response header block whose first field is :status (as nghttp2 sends it), else None."""
    if not block:
        return None
    if block[0] & 0x80:
        return STATIC_STATUS.get(block[0] & 0x7F)
    if block[0] & 0x3F != 8 and block[0] & 0x0F != 8:
        return None
    length, huffman, value = block[1] & 0x7F, bool(block[1] & 0x80), block[2:2 + (block[1] & 0x7F)]
    if not huffman:
        return int(value) if value.isdigit() and len(value) == length else None
    bits, code, digits = "".join(format(b, "08b") for b in value), "", ""
    for bit in bits:
        code += bit
        if code in HUFFMAN_DIGITS:
            digits, code = digits + HUFFMAN_DIGITS[code], ""
        if len(digits) == 3:
            return int(digits)
    return None


def proxy_sockets_to(proxy, port):
    """The proxy's TCP connections to 127.0.0.1:`port` that are established or connecting, from /proc."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % proxy.pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (proxy.pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    with open("/proc/%d/net/tcp" % proxy.pid) as f:
        next(f)
        for line in f:
            cols = line.split()
            if cols[9] in inodes and int(cols[2].split(":")[1], 16) == port and cols[3] in ("01", "02"):
                count += 1
    return count


def post_block(host, path):
    return request_block(host.encode(), path.encode(), b"POST")


# ---------------------------------------------------------------------------------------------------------------
# Item 1: the client's windows bound what the proxy reads from HTTP/1.1 origins.


def flow_control_bound(env):
    lane = ORIGINS["lane"]
    lane.reset_counts()
    before = env.proxy.rss_kib()
    clients = []
    try:
        for _ in range(10):
            c = open_h2(env, "window.tls.test", initial_window=INITIAL_WINDOW_SIZE)
            c.send(b"".join(frame(HEADERS, END_STREAM | END_HEADERS, 2 * i + 1,
                                  request_block(c.host, b"/big/256")) for i in range(100)))
            clients.append(c)
        # Until the origin stops serving (the proxy stopped reading) or has served everything.
        last, still = -1, 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and lane.served < 1000 and still < 20:
            time.sleep(0.1)
            still = still + 1 if lane.served == last else 0
            last = lane.served
        grown = env.proxy.rss_kib() - before
        served = lane.served
    finally:
        for c in clients:
            c.close()
    harness.ensure(grown < 48 * 1024,
                   "10 h2 connections x 100 streams with SETTINGS_INITIAL_WINDOW_SIZE=%d and 256 KiB responses grew "
                   "the proxy's RSS by %d MiB (the origin served %d responses the client cannot take)"
                   % (INITIAL_WINDOW_SIZE, grown >> 10, served))
    return "%d of 1000 responses read from the origin, RSS +%d MiB" % (served, grown >> 10)


# ---------------------------------------------------------------------------------------------------------------
# Item 2: MadeYouReset.


def overflow(stream):
    return frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", 0x7FFFFFFF))


def made_you_reset_goaway(env):
    """20,000 streams each reset by the proxy itself (a WINDOW_UPDATE that overflows the stream's window)."""
    c = open_h2(env, "resets.tls.test")
    try:
        sent = 0
        for start in range(0, 20000, 250):
            batch = b"".join(frame(HEADERS, END_STREAM | END_HEADERS, 2 * i + 1, request_block(c.host, b"/small"))
                             + overflow(2 * i + 1) for i in range(start, start + 250))
            if not c.send(batch):
                break
            sent += 250
        seen = collect(c, 10, until=lambda s: goaway_code(s) is not None)
    finally:
        c.close()
    code = goaway_code(seen)
    harness.ensure(code == ENHANCE_YOUR_CALM,
                   "%d streams reset by the proxy (WINDOW_UPDATE overflow) did not end the connection with GOAWAY "
                   "ENHANCE_YOUR_CALM (got %s)" % (sent, "GOAWAY %d" % code if code is not None else "no GOAWAY"))
    return "GOAWAY ENHANCE_YOUR_CALM after at most %d provoked resets" % sent


def made_you_reset_lanes(env):
    """1,500 requests in flight on lanes, each reset by the proxy (and its lane closed): GOAWAY past the reset
    limit, and the pool bound holds (sampled at the proxy)."""
    lane = ORIGINS["lane"]
    lane.reset_counts()
    peak = [0]
    sampling = threading.Event()

    def sample():
        while not sampling.is_set():
            peak[0] = max(peak[0], proxy_sockets_to(env.proxy, lane.port))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    c = open_h2(env, "resets.tls.test")
    sampler.start()
    try:
        stream = 1
        for round_ in range(250):
            ids = list(range(stream, stream + 12, 2))
            stream += 12
            c.send(b"".join(frame(HEADERS, END_STREAM | END_HEADERS, i, request_block(c.host, b"/hold"))
                            for i in ids))
            time.sleep(0.005)
            if not c.send(b"".join(overflow(i) for i in ids)):
                break
        seen = collect(c, 1)
        sampling.set()
        sampler.join()
        # A second after the attack, the client still connected: what the proxy keeps open for it.
        kept = proxy_sockets_to(env.proxy, lane.port)
    finally:
        c.close()
        sampling.set()
    accepted = lane.accepted
    settled = wait_for(lambda: proxy_sockets_to(env.proxy, lane.port) == 0, 10)
    harness.ensure(goaway_code(seen) == ENHANCE_YOUR_CALM,
                   "1,500 provoked resets of requests in flight on HTTP/1.1 lanes (each closing its connection) did "
                   "not end the client's connection with GOAWAY ENHANCE_YOUR_CALM (got %s); the origin saw %d "
                   "connections opened" % (goaway_code(seen), lane.accepted))
    harness.ensure(kept <= 7, "after 1,500 provoked resets of requests in flight the proxy keeps %d upstream "
                   "connections for one client connection (docs/security.md: at most 6)" % kept)
    harness.ensure(settled, "%d upstream connections still open 10 s after the client left"
                   % proxy_sockets_to(env.proxy, lane.port))
    return "%d upstream connections kept, peak %d while lanes closed and opened (%d opened in all), %s" % (
        kept, peak[0], accepted, "GOAWAY %s" % goaway_code(seen))


def made_you_reset_h2_upstream(env):
    """Streams the proxy resets itself have their upstream requests cancelled (RST_STREAM upstream)."""
    c = open_h2(env, "hold.tls.test")
    h2 = ORIGINS["h2"]
    base = h2.counts("hold")
    try:
        ids = [2 * i + 1 for i in range(50)]
        c.send(b"".join(frame(HEADERS, END_STREAM | END_HEADERS, i, request_block(c.host, b"/held")) for i in ids))
        wait_for(lambda: h2.counts("hold")[0] - base[0] >= 50, 5)
        c.send(b"".join(overflow(i) for i in ids))
        wait_for(lambda: h2.counts("hold")[1] - base[1] >= 50, 5)
        # Streams reset before they could reach the origin must never reach it.
        late = [2 * i + 101 for i in range(50)]
        c.send(b"".join(frame(HEADERS, END_STREAM | END_HEADERS, i, request_block(c.host, b"/held"))
                        + overflow(i) for i in late))
        time.sleep(1)
        requests, resets = (a - b for a, b in zip(h2.counts("hold"), base))
    finally:
        c.close()
    harness.ensure(resets >= requests,
                   "the h2 origin got %d requests and only %d RST_STREAM for streams the proxy reset itself: "
                   "their requests stay open upstream" % (requests, resets))
    return "%d requests reached the origin, %d were cancelled there" % (requests, resets)


# ---------------------------------------------------------------------------------------------------------------
# Item 3: deadlines per request for h2 clients, even while the client PINGs.


def pinging(c, seconds, until):
    """Frames over `seconds` while sending a PING each second; stops once `until(frames)`."""
    seen = []
    end = time.monotonic() + seconds
    while time.monotonic() < end and not until(seen):
        c.send(frame(PING, 0, 0, b"keepaliv"))
        seen += [f for f in collect(c, 1) if f != "closed" and f[0] != PING]
    return seen


def resets_of(seen, ids):
    return {f[2] for f in seen if f[0] == RST_STREAM and f[2] in ids}


def stall_bodies(env, host, released, what):
    """20 streams that send a few body bytes and then nothing while the client PINGs every second: each must be
    reset within 6 x --client-timeout, and `released()` (the upstream let go of) must hold soon after."""
    c = open_h2(env, host)
    ids = {2 * i + 1 for i in range(20)}
    try:
        c.send(b"".join(frame(HEADERS, END_HEADERS, i, post_block(host, "/hold")) + frame(DATA, 0, i, b"part")
                        for i in sorted(ids)))
        reset = resets_of(pinging(c, 6 * CLIENT_TIMEOUT, lambda s: resets_of(s, ids) == ids), ids)
        let_go = wait_for(released, 3)
    finally:
        c.close()
    harness.ensure(reset == ids, "%d of 20 stalled request bodies (%s) were reset within %d s while the client "
                   "PINGed (--client-timeout %d)" % (len(reset), what, 6 * CLIENT_TIMEOUT, CLIENT_TIMEOUT))
    harness.ensure(let_go, "the upstream still holds stalled requests (%s) after their streams were reset" % what)


def stalled_bodies_h1(env):
    lane = ORIGINS["lane"]
    lane.reset_counts()
    stall_bodies(env, "stall.tls.test", lambda: lane.open == 0, "HTTP/1.1 origin")
    return "20 stalled bodies reset, upstream connections released (peak %d)" % lane.peak


def stalled_bodies_h2(env):
    h2 = ORIGINS["h2"]
    base = h2.counts("holdbody")
    stall_bodies(env, "holdbody.tls.test", lambda: h2.counts("holdbody")[1] - base[1] >= 20, "h2 origin")
    return "20 stalled bodies reset, their 20 upstream streams cancelled"


def silent_upstream(env):
    lane = ORIGINS["lane"]
    lane.reset_counts()
    c = open_h2(env, "silent.tls.test")
    try:
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, request_block(c.host, b"/hold")))
        seen = pinging(c, 3 * RESPONSE_TIMEOUT, lambda s: any(f[0] == HEADERS and f[2] == 1 for f in s))
        status = next((f[3] for f in seen if f[0] == HEADERS and f[2] == 1), None)
        released = wait_for(lambda: lane.open == 0, 3)
    finally:
        c.close()
    harness.ensure(status is not None, "no answer within %d s to a request whose upstream never answers "
                   "(--response-timeout %d)" % (3 * RESPONSE_TIMEOUT, RESPONSE_TIMEOUT))
    harness.ensure(status_of(status) == 504, "the silent upstream's request was answered %s, not 504"
                   % status_of(status))
    harness.ensure(released, "the silent upstream's connection is still open after the 504")
    return "504 after --response-timeout, upstream released"


def stalled_header_block(env):
    c = open_h2(env, "stall.tls.test")
    try:
        c.send(frame(HEADERS, 0, 1, literal(b":method", b"GET")))
        start = time.monotonic()
        seen = collect(c, 4 * CLIENT_TIMEOUT, until=lambda s: "closed" in s or goaway_code(s) is not None)
    finally:
        c.close()
    ended = "closed" in seen or goaway_code(seen) is not None
    harness.ensure(ended, "a header block left unfinished held the connection for %d s (--client-timeout %d)"
                   % (4 * CLIENT_TIMEOUT, CLIENT_TIMEOUT))
    return "connection ended %.1f s after the header block stalled" % (time.monotonic() - start)


# ---------------------------------------------------------------------------------------------------------------
# Item 12: an early response on h2 -> h2 is delivered whole.


def early_response(env):
    lost = []
    for attempt in range(8):
        c = open_h2(env, "early.tls.test")
        try:
            c.send(frame(HEADERS, END_HEADERS, 1, post_block("early.tls.test", "/upload"))
                   + frame(DATA, 0, 1, b"x" * 1000))
            status, body, ended = None, b"", False
            end = time.monotonic() + 5
            while time.monotonic() < end and not ended:
                c.send(frame(DATA, 0, 1, b"y" * 1000))
                for f in collect(c, 0.05):
                    if f == "closed":
                        end = 0
                        break
                    kind, flags, stream, payload = f
                    if stream != 1:
                        continue
                    if kind == HEADERS and status_of(payload) == 413:
                        status = 413
                    elif kind == DATA:
                        body += payload
                        ended = ended or bool(flags & END_STREAM)
                    elif kind == RST_STREAM and struct.unpack(">I", payload)[0] != NO_ERROR:
                        end = 0
                        break
        finally:
            c.close()
        if status != 413 or body != b"too large, stop sending" * 40 or not ended:
            lost.append("try %d: status %s, %d of 920 body bytes%s" % (attempt + 1, status, len(body),
                                                                       ", ended" if ended else ""))
    harness.ensure(not lost, "an early 413 then RST_STREAM(NO_ERROR) from the h2 origin was lost in %d of 8 tries "
                   "(RFC 9113 8.1): %s" % (len(lost), "; ".join(lost[:3])))
    return "8 of 8 early responses delivered whole"


# ---------------------------------------------------------------------------------------------------------------
# Item 13: one oversized response head costs its stream only.


def oversized_response_head(env):
    c = open_h2(env, "bighead.tls.test")
    try:
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, request_block(c.host, b"/big-head")))
        time.sleep(0.3)
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 3, request_block(c.host, b"/small")))
        seen = collect(c, 5, until=lambda s: {f[2] for f in s if f != "closed" and f[0] in (HEADERS, RST_STREAM)}
                       >= {1, 3})
    finally:
        c.close()
    code = goaway_code(seen)
    harness.ensure(code is None and "closed" not in seen,
                   "a response header section over 64 KiB on one stream ended the whole connection (%s)"
                   % ("GOAWAY %d" % code if code is not None else "closed"))
    first = [f for f in seen if f != "closed" and f[2] == 1 and f[0] in (HEADERS, RST_STREAM)]
    second = [f for f in seen if f != "closed" and f[2] == 3 and f[0] == HEADERS]
    harness.ensure(first, "the stream with the oversized response head got neither an answer nor a reset")
    harness.ensure(first[0][0] == RST_STREAM or status_of(first[0][3]) == 502,
                   "the oversized response head was answered %s, not 502 or RST_STREAM" % status_of(first[0][3]))
    harness.ensure(second, "the other stream on the connection got no answer")
    return "stream 1: %s, stream 3 served" % ("502" if first[0][0] == HEADERS else "RST_STREAM")


# ---------------------------------------------------------------------------------------------------------------
# Item 4: an extra response from an HTTP/1.1 origin is nobody's answer.


def response_to(c, stream, seconds=5):
    """(status, body) of `stream`'s response, None when it did not end within `seconds`."""
    status, body = None, b""
    for f in c.frames(seconds):
        if f is None:
            break
        kind, flags, sid, payload = f
        if sid != stream:
            continue
        if kind == HEADERS:
            status = status_of(payload)
        elif kind == DATA:
            body += payload
        if kind in (HEADERS, DATA) and flags & END_STREAM:
            return status, body
        if kind == RST_STREAM:
            return "reset", body
    return None


def extra_response(env):
    c = open_h2(env, "twice.tls.test")
    try:
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, request_block(c.host, b"/double")))
        first = response_to(c, 1)
        time.sleep(0.2)
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 3, request_block(c.host, b"/next")))
        second = response_to(c, 3)
    finally:
        c.close()
    harness.ensure(first == (200, b"first"), "the first request got %r" % (first,))
    harness.ensure(second is not None and second[1] != b"extra",
                   "the origin's extra response was served as the next stream's answer: %r" % (second,))
    harness.ensure(second == (200, b"ok"), "the next request got %r, not the origin's answer to it" % (second,))
    harness.ensure("no request outstanding" in env.proxy.stderr(), "no notice of the extra response")
    return "the lane closed with a notice; the next stream got its own answer"


# ---------------------------------------------------------------------------------------------------------------
# Item 5: an HTTP/1.1 client that resets mid-download stops the upstream.


def reset_mid_download(env):
    lane = ORIGINS["lane"]
    lane.reset_counts()
    tls = env.proxy.tls_client("endless.tls.test", env.proxy_ca)
    tls.sendall(b"GET /endless HTTP/1.1\r\nHost: endless.tls.test\r\n\r\n")
    got = 0
    while got < 1 << 20:
        chunk = tls.recv(65536)
        harness.ensure(chunk, "the download ended after %d bytes" % got)
        got += len(chunk)
    harness.rst_close(tls)
    at_reset = lane.sent
    time.sleep(3)
    after = lane.sent
    open_left = lane.open
    harness.ensure(after - at_reset < 32 << 20,
                   "after the client reset, the proxy read %d MiB more of the body from the origin"
                   % ((after - at_reset) >> 20))
    harness.ensure(wait_for(lambda: lane.open == 0, 5), "the upstream connection is still open (%d)" % open_left)
    return "%d KiB more sent by the origin after the client's reset, then the upstream closed" % (
        (after - at_reset) >> 10)


# ---------------------------------------------------------------------------------------------------------------
# Item 6: an HTTP/1.1 client's request refused by the h2 upstream's GOAWAY is retried on a new connection.


def goaway_refused_retry(env):
    with env.proxy.tls_client("refuse.tls.test", env.proxy_ca) as tls:
        first = harness.exchange(tls, b"GET /first HTTP/1.1\r\nHost: refuse.tls.test\r\n\r\n")
        second = harness.exchange(tls, b"GET /second HTTP/1.1\r\nHost: refuse.tls.test\r\n\r\n")
    harness.ensure(first[0] == 200 and first[2] == b"ok", "the first request got %d %r" % (first[0], first[2][:80]))
    harness.ensure(second[0] == 200 and second[2] == b"ok",
                   "a request the upstream's GOAWAY refused (never processed) got %d %r, not a retry on a new "
                   "connection" % (second[0], second[2][:80]))
    requests, _ = ORIGINS["h2"].counts("refuse")
    return "refused request retried on a new connection (%d requests reached the origin)" % requests


def held_client_released(env):
    """An upload whose origin stops reading fills its lane, so the proxy stops reading the whole client; when that
    origin then closes its connection, the proxy must read the client again: a stream sent meanwhile is answered
    (before, the client stayed unread until the idle timeout, its request deadlines off)."""
    lane = ORIGINS["lane"]
    lane.noread_release.clear()
    c = open_h2(env, "held.tls.test")
    try:
        stream_window, connection_window, credits = 65535, 65535, 0
        c.send(frame(HEADERS, END_HEADERS, 1, post_block("held.tls.test", "/noread")))
        quiet_since, held = None, False
        deadline = time.monotonic() + 20
        # Upload within the proxy's windows until it gives no credit back for a second: it holds the client.
        while time.monotonic() < deadline:
            size = min(1 << 20, stream_window, connection_window)
            if size > 0:
                frames = b"".join(frame(DATA, 0, 1, b"u" * min(16384, size - at)) for at in range(0, size, 16384))
                if not c.send(frames):
                    held = True
                    break
                stream_window -= size
                connection_window -= size
                quiet_since = None
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 1:
                held = True
                break
            for f in collect(c, 0.05):
                harness.ensure(f != "closed", "the proxy closed the connection during the upload")
                if f[0] == WINDOW_UPDATE:
                    increment = struct.unpack(">I", f[3][:4])[0] & 0x7FFFFFFF
                    credits += increment
                    if f[2] == 0:
                        connection_window += increment
                    elif f[2] == 1:
                        stream_window += increment
                elif f[0] == SETTINGS and not f[1] & ACK:
                    for at in range(0, len(f[3]) - 5, 6):
                        ident, value = struct.unpack(">HI", f[3][at:at + 6])
                        if ident == 4:
                            stream_window += value - 65535
        harness.ensure(held, "the upload never filled the lane in 20 s (%d KiB credited)" % (credits >> 10))
        c.send(frame(HEADERS, END_HEADERS | END_STREAM, 3, request_block(b"held.tls.test", b"/big/1")))
        lane.noread_release.set()
        released_at = time.monotonic()
        seen = collect(c, 8, until=lambda s: any(f != "closed" and f[0] == HEADERS and f[2] == 3 for f in s))
        answered = [f for f in seen if f != "closed" and f[0] == HEADERS and f[2] == 3]
    finally:
        lane.noread_release.set()
        c.close()
    harness.ensure(answered and status_of(answered[0][3]) == 200,
                   "a stream sent while the proxy held the client got no answer within 8 s of the lane whose full "
                   "buffer held it closing (%s)" % ("the connection closed" if "closed" in seen else "no answer"))
    return "held after %d KiB credited; the next stream answered %.1f s after the lane closed" % (
        credits >> 10, time.monotonic() - released_at)


CHECKS = [
    ("flow-control-window-1-10x100-streams", flow_control_bound, 60),
    ("made-you-reset-window-overflow-goaway", made_you_reset_goaway, 60),
    ("made-you-reset-lanes-pool-bound", made_you_reset_lanes, 60),
    ("made-you-reset-cancels-h2-upstream", made_you_reset_h2_upstream, 30),
    ("deadline-stalled-bodies-h2-to-h1", stalled_bodies_h1, 30),
    ("deadline-stalled-bodies-h2-to-h2", stalled_bodies_h2, 30),
    ("deadline-silent-upstream-504", silent_upstream, 30),
    ("deadline-stalled-header-block", stalled_header_block, 30),
    ("early-response-h2-to-h2", early_response, 90),
    ("oversized-response-head-h2", oversized_response_head, 30),
    ("extra-response-h1-origin", extra_response, 30),
    ("http1-client-reset-mid-download", reset_mid_download, 30),
    ("goaway-refused-request-retried", goaway_refused_retry, 30),
    ("held-client-released-when-its-lane-closes", held_client_released, 45),
]
