"""What every attack family shares: a temporary PKI, recording origins, hostile TLS upstreams, the proxy process and
a good client. Python 3 standard library only; everything listens on 127.0.0.1 port 0."""

import base64
import fcntl
import os
import random
import re
import resource
import socket
import ssl
import struct
import subprocess
import termios
import threading
import time

TOKEN = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
CHECK_ERRORS = (AssertionError, OSError, ValueError)


class CheckFailed(AssertionError):
    """A check's assertion, with the proxy behaviour that broke it."""


def ensure(condition, message):
    if not condition:
        raise CheckFailed(message)


def rst_close(sock):
    """Closes with a TCP reset (SO_LINGER 0) instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def wait_sent(sock, timeout=5):
    """Waits until the kernel has sent every byte queued on `sock` (SIOCOUTQ), so a reset cannot overtake them."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0] == 0:
            return
        time.sleep(0.01)


def recv_until_closed(sock, timeout, limit=1 << 20):
    """Everything the peer sends until it closes, `limit` bytes, or `timeout` seconds: (bytes, closed)."""
    deadline = time.monotonic() + timeout
    data = b""
    while len(data) < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            return data, False
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return data, False
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return data, True
        if not chunk:
            return data, True
        data += chunk
    return data, False


# ---------------------------------------------------------------------------------------------------------------
# A strict HTTP/1.1 reader (RFC 9112): what an origin receives and what a client receives must parse with it.


class Malformed(Exception):
    pass


def split_head(buf):
    """(head bytes without the final CRLFCRLF, rest) or None while incomplete."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return None
    return buf[:end], buf[end + 4:]


def strict_fields(lines):
    fields = []
    for line in lines:
        if line[:1] in (b" ", b"\t"):
            raise Malformed("obs-fold line %r" % line[:60])
        name, colon, value = line.partition(b":")
        if not colon or not TOKEN.match(name):
            raise Malformed("bad field line %r" % line[:60])
        value = value.strip(b" \t")
        if any(c < 0x20 and c != 0x09 or c == 0x7F for c in value):
            raise Malformed("control byte in field %r" % line[:60])
        fields.append((name.lower(), value))
    return fields


def strict_framing(fields, is_request):
    """('length', n), ('chunked', None) or ('none', None); Malformed for ambiguous framing."""
    cls = [v for n, v in fields if n == b"content-length"]
    tes = [v for n, v in fields if n == b"transfer-encoding"]
    if cls and tes:
        raise Malformed("both Content-Length and Transfer-Encoding")
    if len(cls) > 1:
        raise Malformed("%d Content-Length fields %r" % (len(cls), cls))
    if tes:
        codings = [c.strip(b" \t").lower() for c in b",".join(tes).split(b",")]
        if any(not TOKEN.match(c) for c in codings) or codings[-1] != b"chunked" or codings.count(b"chunked") != 1:
            raise Malformed("Transfer-Encoding %r" % tes)
        return ("chunked", None)
    if cls:
        if not re.fullmatch(rb"[0-9]{1,15}", cls[0]):
            raise Malformed("Content-Length %r" % cls[0])
        return ("length", int(cls[0]))
    return ("none", None) if is_request else ("close", None)


def read_chunked(buf):
    """(body, rest) of a complete chunked body, None while incomplete; Malformed when it breaks the grammar."""
    pos, body = 0, b""
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            if len(buf) - pos > 4096:
                raise Malformed("chunk size line over 4 KiB")
            return None
        line = buf[pos:eol]
        size_text = line.split(b";", 1)[0].strip(b" \t")
        if not re.fullmatch(rb"[0-9A-Fa-f]{1,15}", size_text) or b"\n" in line or b"\r" in line:
            raise Malformed("chunk size %r" % line[:40])
        size = int(size_text, 16)
        pos = eol + 2
        if size == 0:
            end = buf.find(b"\r\n\r\n", pos - 2)
            if end < 0:
                return None
            strict_fields([l for l in buf[pos:end].split(b"\r\n") if l])
            return body, buf[end + 4:]
        if len(buf) < pos + size + 2:
            return None
        if buf[pos + size:pos + size + 2] != b"\r\n":
            raise Malformed("chunk data not followed by CRLF")
        body += buf[pos:pos + size]
        pos += size + 2


def parse_request_head(head):
    """(method, target, version, fields) of a head that is strictly valid, else Malformed."""
    if b"\n" in head.replace(b"\r\n", b"") or b"\r" in head.replace(b"\r\n", b"") or b"\x00" in head:
        raise Malformed("bare CR/LF or NUL in head")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not TOKEN.match(parts[0]) or not re.fullmatch(rb"[\x21-\x7e]+", parts[1]):
        raise Malformed("request line %r" % lines[0][:80])
    if parts[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
        raise Malformed("version %r" % parts[2][:20])
    fields = strict_fields(lines[1:])
    hosts = [v for n, v in fields if n == b"host"]
    if parts[2] == b"HTTP/1.1" and len(hosts) != 1:
        raise Malformed("%d Host fields" % len(hosts))
    return parts[0], parts[1], parts[2], fields


def parse_response(buf, request_method=b"GET", eof=False):
    """(status, fields, body, rest) of one complete response in `buf`, None while incomplete; Malformed when it is
    not one unambiguous HTTP/1.1 response. A response delimited by close needs the whole stream in `buf`."""
    sh = split_head(buf)
    if sh is None:
        return None
    head, rest = sh
    if b"\n" in head.replace(b"\r\n", b"") or b"\r" in head.replace(b"\r\n", b"") or b"\x00" in head:
        raise Malformed("bare CR/LF or NUL in response head")
    lines = head.split(b"\r\n")
    m = re.fullmatch(rb"HTTP/1\.[01] ([0-9]{3})(?: [^\r\n]*)?", lines[0])
    if not m:
        raise Malformed("status line %r" % lines[0][:80])
    status = int(m.group(1))
    fields = strict_fields(lines[1:])
    kind, n = strict_framing(fields, is_request=False)
    if request_method == b"HEAD" or status in (204, 304) or 100 <= status < 200:
        return status, fields, b"", rest
    if kind == "length":
        if len(rest) < n:
            return None
        return status, fields, rest[:n], rest[n:]
    if kind == "chunked":
        got = read_chunked(rest)
        if got is None:
            return None
        return (status, fields) + got
    return (status, fields, rest, b"") if eof else None


# ---------------------------------------------------------------------------------------------------------------
# PKI: a test CA (the proxy's --trust-ca) and a leaf for *.tls.test and *.bad.test (the origins).


def make_pki(folder):
    def run(*args):
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "30", "-subj", "/CN=adversarial CA",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    with open(os.path.join(folder, "leaf.ext"), "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                "subjectAltName=DNS:*.tls.test,DNS:*.bad.test\n")
    run("req", *ec, "-keyout", "leaf.key", "-out", "leaf.csr", "-subj", "/CN=adversarial origin")
    run("x509", "-req", "-in", "leaf.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "30",
        "-sha256", "-extfile", "leaf.ext", "-out", "leaf.pem")
    return os.path.join(folder, "ca.pem"), os.path.join(folder, "leaf.pem"), os.path.join(folder, "leaf.key")


# ---------------------------------------------------------------------------------------------------------------
# The recording origin: answers strictly parsed requests, records the raw bytes of every connection, and flags any
# head or framing that is not strictly valid (which a proxy must never forward). The path picks a behaviour.

GOOD_BODY = b"good:"
POISON = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\npoisoned"


class Origin:
    def __init__(self, tls_files=None):
        self.lock = threading.Lock()
        self.connections = []  # [{"raw": bytearray, "requests": [(method, target, host)], "violations": [...]}]
        self.response_variants = []  # raw responses for /resp/<i>
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(512)
        self.port = self.listener.getsockname()[1]
        self.context = None
        if tls_files:
            self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.context.load_cert_chain(*tls_files)
            self.context.set_alpn_protocols(["http/1.1"])
        self.stopped = False
        self.unsolicited_sent = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def stop(self):
        self.stopped = True
        self.listener.close()

    def mark(self):
        with self.lock:
            return len(self.connections)

    def since(self, mark):
        with self.lock:
            return list(self.connections[mark:])

    def violations(self, mark=0):
        return [v for c in self.since(mark) for v in c["violations"]]

    def requests(self, mark=0, host_suffix=None):
        out = []
        for c in self.since(mark):
            out += [r for r in c["requests"] if host_suffix is None or r[2].endswith(host_suffix)]
        return out

    def _serve(self, sock):
        record = {"raw": bytearray(), "requests": [], "heads": [], "violations": []}
        with self.lock:
            self.connections.append(record)
        try:
            sock.settimeout(30)
            if self.context:
                sock = self.context.wrap_socket(sock, server_side=True)
            buf = b""
            while True:
                parsed = self._next_request(buf, record)
                if parsed is None:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    record["raw"] += chunk
                    buf += chunk
                    continue
                (method, target, host, body, fields), buf = parsed
                record["requests"].append((method, target, host))
                record["heads"].append((method, target, fields))
                if not self._answer(sock, method, target, body, fields):
                    return
        except Malformed as e:
            record["violations"].append("origin received %s (raw %r)" % (e, bytes(record["raw"][:200])))
            try:
                sock.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            except OSError:
                pass
        except (OSError, ssl.SSLError):
            pass
        finally:
            try:
                sock.close()
            except OSError:
                pass

    @staticmethod
    def _next_request(buf, record):
        sh = split_head(buf)
        if sh is None:
            if len(buf) > 1 << 20:
                raise Malformed("a head over 1 MiB")
            return None
        head, rest = sh
        method, target, _, fields = parse_request_head(head)
        host = next((v for n, v in fields if n == b"host"), b"").decode("latin-1")
        kind, n = strict_framing(fields, is_request=True)
        if kind == "length":
            if len(rest) < n:
                return None
            return (method, target, host, rest[:n], fields), rest[n:]
        if kind == "chunked":
            got = read_chunked(rest)
            if got is None:
                return None
            return (method, target, host, got[0], fields), got[1]
        return (method, target, host, b"", fields), rest

    def heads(self, mark=0):
        """(method, target, fields) of every request received since `mark`; field names lower-cased."""
        return [h for c in self.since(mark) for h in c["heads"]]

    def _answer(self, sock, method, target, body, fields=()):
        """Answers one request; False when the connection must end."""
        path = target.decode("latin-1")
        upgrade = next((v for n, v in fields if n == b"upgrade"), b"")
        if path == "/h2c" and b"h2c" in upgrade.lower():
            # What an h2c origin does (RFC 7540 §3.2): 101, then HTTP/2 the proxy would never parse.
            sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
                         b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            time.sleep(0.5)
            return False
        if path == "/nominate":
            sock.sendall(b"HTTP/1.1 200 OK\r\nConnection: X-Resp-Hop, keep-alive\r\nX-Resp-Hop: origin-secret\r\n"
                         b"Content-Length: 2\r\n\r\nok")
            return True
        if path == "/chunked":
            sock.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            return True
        if path == "/cut-reset":
            # A body delimited by the connection's end, which the origin then resets: cut, never complete.
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npartial body")
            wait_sent(sock)
            rst_close(sock)
            return False
        if path.startswith("/resp/"):
            sock.sendall(self.response_variants[int(path[6:])])
            time.sleep(0.3)
            return False
        if path == "/unsolicited-together":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst" + POISON)
            self.unsolicited_sent.set()
            return True
        if path == "/unsolicited":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
            time.sleep(0.2)
            sock.sendall(POISON)
            self.unsolicited_sent.set()
            return True
        if path == "/101":
            sock.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
            time.sleep(0.5)
            sock.sendall(b"raw bytes after an unsolicited 101")
            time.sleep(0.5)
            return False
        if path == "/reset-head":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Le")
            time.sleep(0.1)
            rst_close(sock)
            return False
        if path == "/reset-body":
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n" + b"x" * 1000)
            time.sleep(0.1)
            rst_close(sock)
            return False
        payload = GOOD_BODY + target + b":len=%d" % len(body)
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload)
        return True


# ---------------------------------------------------------------------------------------------------------------
# A hostile TLS upstream: reads the proxy's ClientHello, then misbehaves as its SNI's first label says.


def split_records(data):
    out, pos = [], 0
    while pos + 5 <= len(data):
        n = struct.unpack(">H", data[pos + 3:pos + 5])[0]
        out.append(data[pos:pos + 5 + n])
        pos += 5 + n
    return out


class HostileTLSOrigin:
    """`garbage-after-sh.*`: the ServerHello record, then random bytes. `garbage.*`: random bytes at once.
    `reset-handshake.*`: a reset after the ClientHello. `half-flight.*`: half the server's flight, then FIN."""

    def __init__(self, tls_files):
        self.files = tls_files
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.seen = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def stop(self):
        self.listener.close()

    def _serve(self, sock):
        names = []
        # A context per connection, so that each callback records its own connection's SNI.
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*self.files)
        ctx.sni_callback = lambda obj, name, c: names.append(name or "")
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(incoming, outgoing, server_side=True)
        rng = random.Random(1)
        try:
            sock.settimeout(10)
            while not outgoing.pending:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                incoming.write(chunk)
                try:
                    obj.do_handshake()
                except ssl.SSLWantReadError:
                    pass
            flight = outgoing.read()
            mode = (names[0] if names else "").split(".")[0]
            self.seen.append(mode)
            if mode == "garbage-after-sh":
                sock.sendall(split_records(flight)[0] + bytes(rng.getrandbits(8) for _ in range(4096)))
            elif mode == "garbage":
                sock.sendall(bytes(rng.getrandbits(8) for _ in range(4096)))
            elif mode == "reset-handshake":
                rst_close(sock)
                return
            else:
                sock.sendall(flight[:len(flight) // 2])
            time.sleep(1)
        except (OSError, ssl.SSLError):
            pass
        finally:
            sock.close()


# ---------------------------------------------------------------------------------------------------------------
# The proxy under test.


class Proxy:
    def __init__(self, binary, folder, ca_dir, trust_ca, args, nofile=None):
        self.folder = folder
        self.stderr_path = os.path.join(folder, "proxy-%d.stderr" % id(self))
        self.stdout_path = os.path.join(folder, "proxy-%d.stdout" % id(self))
        self.args = args
        full = [binary, "run", "--listen", "127.0.0.1:0", "--ca-dir", ca_dir, "--trust-ca", trust_ca,
                "--threads", "2", "--quiet"] + args

        def limit():
            if nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.process = subprocess.Popen(full, cwd=folder, stdout=open(self.stdout_path, "wb"),
                                        stderr=open(self.stderr_path, "wb"), preexec_fn=limit)
        self.pid = self.process.pid
        self.port = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.process.poll() is None:
            m = re.search(r"ATSProxy listening on 127\.0\.0\.1:(\d+)", self.stdout())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.02)
        if self.port is None:
            self.stop()
            raise RuntimeError("the proxy did not start: %s" % self.stderr()[-2000:])
        self.auth = None

    def stdout(self):
        with open(self.stdout_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def alive(self):
        return self.process.poll() is None

    def died_within(self, seconds):
        """True when the process has exited or exits within `seconds` (a crash can lag the reset a client saw)."""
        try:
            self.process.wait(seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def exit_description(self):
        code = self.process.poll()
        text = self.stderr()
        # The crash's own words (glibc's "free(): double free detected", Swift's "Fatal error", the signal) rather
        # than the end of the backtrace.
        causes = [l.strip() for l in text.splitlines()
                  if re.search(r"free\(\)|Fatal error|\*\*\* .*(signal|SIG)|Crash|Aborted|Segmentation", l)]
        what = " | ".join(causes[:3]) if causes else "stderr ends: " + text[-600:].strip().replace("\n", " | ")
        return "exited with status %s: %s" % (code, what)

    def fd_count(self):
        return len(os.listdir("/proc/%d/fd" % self.pid))

    def rss_kib(self):
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return -1

    def self_connections(self):
        """How many of the proxy's own sockets are connected to its listening port (a loop through itself)."""
        inodes = set()
        for fd in os.listdir("/proc/%d/fd" % self.pid):
            try:
                target = os.readlink("/proc/%d/fd/%s" % (self.pid, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
        count = 0
        for table in ("tcp", "tcp6"):
            try:
                with open("/proc/%d/net/%s" % (self.pid, table)) as f:
                    next(f)
                    for line in f:
                        cols = line.split()
                        remote_port = int(cols[2].split(":")[1], 16)
                        if cols[9] in inodes and remote_port == self.port and cols[3] == "01":
                            count += 1
            except OSError:
                continue
        return count

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    # -- clients -------------------------------------------------------------------------------------------------

    def connect(self, timeout=10):
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def auth_field(self):
        if not self.auth:
            return b""
        return b"Proxy-Authorization: Basic " + base64.b64encode(self.auth.encode()) + b"\r\n"

    def connect_tunnel(self, host, port=443, timeout=10):
        """A socket after `CONNECT host:port` was answered 200 (CheckFailed otherwise)."""
        sock = self.connect(timeout)
        target = b"%s:%d" % (host.encode(), port)
        sock.sendall(b"CONNECT " + target + b" HTTP/1.1\r\nHost: " + target + b"\r\n" + self.auth_field() + b"\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            ensure(chunk, "CONNECT %s: the proxy closed before answering" % host[:60])
            head += chunk
        ensure(head.startswith(b"HTTP/1.1 200"), "CONNECT %s answered %r" % (host[:60], head[:60]))
        ensure(head.endswith(b"\r\n\r\n"), "bytes after the CONNECT answer: %r" % head[:120])
        return sock

    def tls_client(self, host, proxy_ca, alpn=("http/1.1",), timeout=10):
        sock = self.connect_tunnel(host, timeout=timeout)
        ctx = ssl.create_default_context(cafile=proxy_ca)
        ctx.set_alpn_protocols(list(alpn))
        return ctx.wrap_socket(sock, server_hostname=host)


def exchange(sock, request, timeout=10, method=b"GET"):
    """Sends `request`, returns (status, fields, body, leftover) of one strictly parsed response."""
    sock.sendall(request)
    buf = b""
    deadline = time.monotonic() + timeout
    while True:
        got = parse_response(buf, method)
        if got is not None:
            return got
        left = deadline - time.monotonic()
        ensure(left > 0, "no complete response within %ss (got %r)" % (timeout, buf[:120]))
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk:
            got = parse_response(buf, method, eof=True)
            if got is not None:
                return got
            ensure(split_head(buf) is None, "the connection closed inside a response's body (got %r)" % buf[:160])
            raise CheckFailed("the proxy closed without a response (got %r)" % buf[:160])
        buf += chunk


def plain_get(proxy, host, path="/good", extra=b"", timeout=10):
    with proxy.connect(timeout) as sock:
        request = (b"GET http://%s%s HTTP/1.1\r\nHost: %s\r\n" % (host.encode(), path.encode(), host.encode())
                   + proxy.auth_field() + extra + b"\r\n")
        return exchange(sock, request, timeout)


def good_client(proxy, proxy_ca):
    """A well-behaved client through the proxy: a plain request and an intercepted HTTPS request."""
    status, _, body, _ = plain_get(proxy, "good.plain.test", "/good")
    ensure(status == 200 and body == b"good:/good:len=0",
           "a good plain client got %d %r" % (status, body[:80]))
    with proxy.tls_client("good.tls.test", proxy_ca) as tls:
        status, _, body, _ = exchange(tls, b"GET /good HTTP/1.1\r\nHost: good.tls.test\r\n\r\n")
    ensure(status == 200 and body == b"good:/good:len=0",
           "a good HTTPS client got %d %r" % (status, body[:80]))


def wait_closed(sock, timeout):
    """Seconds until the peer closed `sock` (reading and discarding), or None if it stayed open."""
    start = time.monotonic()
    _, closed = recv_until_closed(sock, timeout)
    return time.monotonic() - start if closed else None
