"""Family 10: requests the proxy must see, hosts both sides read the same way, responses delivered exactly (issue 30,
items 7 to 11 and 14). An h2c upgrade must not turn a connection into HTTP/2 nobody parses; the origin must read the
host the proxy judged; fields one hop named in Connection stay on that hop; codings the proxy does not implement are
refused; chunked never reaches an HTTP/1.0 client; a response the origin cut with a reset reaches the client cut."""

import socket
import ssl
import struct

import harness
from attack_h2flood import END_HEADERS, END_STREAM, GOAWAY, H2, HEADERS, RST_STREAM, frame, literal

H2C_FIELDS = b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"


def field(fields, name):
    return [v for n, v in fields if n == name]


def client_for(env, tls, host, strict_eof=False):
    """(socket, request prefix) for a plain request through the proxy or one inside an intercepted tunnel."""
    if not tls:
        return env.proxy.connect(), lambda path: b"http://%s%s" % (host, path)
    sock = env.proxy.connect_tunnel(host.decode())
    ctx = ssl.create_default_context(cafile=env.proxy_ca)
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx.wrap_socket(sock, server_hostname=host.decode(), suppress_ragged_eofs=not strict_eof), lambda p: p


def refused_locally(origin, mark, sock, request, status, note):
    """Sends `request`; the proxy must answer `status` itself, forwarding nothing since `mark`."""
    with sock:
        sock.sendall(request)
        data, _ = harness.recv_until_closed(sock, 5)
    harness.ensure(not origin.requests(mark), "%s reached the origin: %r" % (note, origin.requests(mark)))
    harness.ensure(data.startswith(b"HTTP/1.1 %d" % status), "%s was answered %r" % (note, data[:60]))


def h2c_upgrade(tls):
    """Item 7: `Upgrade: h2c` is stripped (with HTTP2-Settings): the origin never sees it and never switches."""
    def check(env):
        host = b"hy1.tls.test" if tls else b"hy1.plain.test"
        origin = env.origin_for(tls)
        mark = origin.mark()
        sock, target = client_for(env, tls, host)
        with sock:
            status, fields, body, _ = harness.exchange(
                sock, b"GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (target(b"/h2c"), host, H2C_FIELDS))
        heads = origin.heads(mark)
        harness.ensure(heads, "the request never reached the origin (client got %d)" % status)
        _, _, got = heads[0]
        harness.ensure(not any(b"h2c" in v.lower() for v in field(got, b"upgrade")),
                       "the origin received the h2c upgrade: %r" % got)
        harness.ensure(not field(got, b"http2-settings"), "the origin received HTTP2-Settings: %r" % got)
        harness.ensure(status == 200 and body.startswith(b"good:/h2c"),
                       "the client got %d %r instead of the origin's plain answer" % (status, body[:60]))

    return check


def h2_request(env, host, block, note):
    """Sends one h2 request (HEADERS `block`) and returns 'reset', 'goaway' or 'served' for its stream."""
    c = H2(env, host)
    try:
        c.send(frame(HEADERS, END_STREAM | END_HEADERS, 1, block))
        for f in c.frames(10):
            harness.ensure(f is not None, "%s: the proxy closed the connection without a word" % note)
            kind, _, stream, _ = f
            if kind == RST_STREAM and stream == 1:
                return "reset"
            if kind == GOAWAY:
                return "goaway"
            if kind == HEADERS and stream == 1:
                return "served"
        raise harness.CheckFailed("%s: no answer within 10 s" % note)
    finally:
        c.close()


def h2c_extended_connect(env):
    """Item 7: an extended CONNECT with `:protocol h2c` is refused, never turned into an Upgrade the origin takes."""
    mark = env.tls_origin.mark()
    host = b"hy2.tls.test"
    block = (literal(b":method", b"CONNECT") + literal(b":protocol", b"h2c") + literal(b":scheme", b"https")
             + literal(b":authority", host) + literal(b":path", b"/h2c"))
    outcome = h2_request(env, host.decode(), block, ":protocol h2c")
    upgrades = [f for _, _, f in env.tls_origin.heads(mark) if field(f, b"upgrade")]
    harness.ensure(not upgrades, "the origin received an Upgrade from an extended CONNECT: %r" % upgrades[:1])
    harness.ensure(outcome == "reset", "an extended CONNECT for h2c was %s, not refused" % outcome)


def h2_authority(authority, host_field, note):
    """Item 8: `:authority` with userinfo, or with a `host` that names another host, is malformed (RFC 9113
    §8.3.1): the stream is reset and nothing reaches the origin."""
    def check(env):
        mark = env.tls_origin.mark()
        block = (literal(b":method", b"GET") + literal(b":scheme", b"https") + literal(b":authority", authority)
                 + literal(b":path", b"/authority"))
        if host_field:
            block += literal(b"host", host_field)
        outcome = h2_request(env, "hy3.tls.test", block, note)
        seen = env.tls_origin.requests(mark)
        harness.ensure(not seen, "%s reached the origin: %r" % (note, seen))
        harness.ensure(outcome == "reset", "%s was %s, not refused" % (note, outcome))

    return check


def absolute_form_in_tunnel(other_host):
    """Item 8: an absolute-form target inside an intercepted tunnel. Another host than the tunnel's is refused; the
    tunnel's own goes to the origin in origin form with its Host (RFC 9112 §3.2.2: the target's host wins)."""
    def check(env):
        mark = env.tls_origin.mark()
        host = b"hy4.tls.test"
        target_host = b"elsewhere.tls.test" if other_host else host
        sock, _ = client_for(env, True, host)
        with sock:
            status, _, body, _ = harness.exchange(
                sock, b"GET https://%s/abs HTTP/1.1\r\nHost: %s\r\n\r\n" % (target_host, host))
        heads = env.tls_origin.heads(mark)
        if other_host:
            harness.ensure(not heads, "a target for another host reached the tunnel's origin: %r" % heads[:1])
            harness.ensure(status in (400, 421), "a target for another host got %d, not refused" % status)
            return
        harness.ensure(status == 200, "the tunnel's own host in absolute form got %d %r" % (status, body[:60]))
        harness.ensure(len(heads) == 1 and heads[0][1] == b"/abs",
                       "the origin received %r, not the origin-form target /abs" % [h[1] for h in heads])
        harness.ensure(field(heads[0][2], b"host") == [host], "the origin read Host %r" % field(heads[0][2], b"host"))

    return check


def invalid_host(tls):
    """Item 8: a Host that is not one host[:port] (`a, b`) gets 400 (RFC 9112 §3.2); nothing is forwarded."""
    def check(env):
        host = b"hy5.tls.test" if tls else b"hy5.plain.test"
        origin = env.origin_for(tls)
        mark = origin.mark()
        sock, target = client_for(env, tls, host)
        refused_locally(origin, mark, sock, b"GET %s HTTP/1.1\r\nHost: %s, evil.test\r\n\r\n" % (target(b"/host"), host),
                        400, "a Host list")

    return check


def transfer_coding(coding):
    """Item 9: a transfer coding the proxy does not implement gets 501 (as nginx answers), not forwarded."""
    def check(env):
        refused_locally(env.origin, env.origin.mark(), env.proxy.connect(),
                        b"POST http://hy6.plain.test/te HTTP/1.1\r\nHost: hy6.plain.test\r\nTransfer-Encoding: %s"
                        b"\r\n\r\n5\r\nhello\r\n0\r\n\r\n" % coding, 501, "Transfer-Encoding %r" % coding)

    return check


def chunked_to_http10(tls):
    """Item 9: a chunked response never reaches an HTTP/1.0 client: de-chunked and delimited by the close."""
    def check(env):
        host = b"hy7.tls.test" if tls else b"hy7.plain.test"
        sock, target = client_for(env, tls, host)
        with sock:
            sock.sendall(b"GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" % (target(b"/chunked"), host))
            data, closed = harness.recv_until_closed(sock, 5)
        harness.ensure(closed, "the connection stayed open after a close-delimited answer")
        head, _, body = data.partition(b"\r\n\r\n")
        harness.ensure(b"transfer-encoding" not in head.lower(), "an HTTP/1.0 client got %r" % head[:200])
        harness.ensure(body == b"hello world", "an HTTP/1.0 client got the body %r" % body[:80])

    return check


def connection_nominated(tls):
    """Item 14: fields named in Connection stay on their hop, both ways (RFC 9110 §7.6.1)."""
    def check(env):
        host = b"hy8.tls.test" if tls else b"hy8.plain.test"
        origin = env.origin_for(tls)
        mark = origin.mark()
        sock, target = client_for(env, tls, host)
        with sock:
            status, fields, _, _ = harness.exchange(
                sock, b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: X-Hop, keep-alive\r\nX-Hop: client-secret\r\n"
                b"Keep-Alive: timeout=5\r\n\r\n" % (target(b"/nominate"), host))
        heads = origin.heads(mark)
        harness.ensure(heads, "nothing reached the origin")
        got = heads[0][2]
        harness.ensure(not field(got, b"x-hop") and not field(got, b"keep-alive"),
                       "the origin received fields the client named in Connection: %r" % got)
        harness.ensure(status == 200, "the client got %d" % status)
        harness.ensure(not field(fields, b"x-resp-hop"),
                       "the client received a field the origin named in Connection: %r" % fields)

    return check


def connection_names_framing(env):
    """Item 14: a Connection that names Content-Length would let one hop drop the body's framing: 400."""
    refused_locally(env.origin, env.origin.mark(), env.proxy.connect(),
                    b"POST http://hy9.plain.test/x HTTP/1.1\r\nHost: hy9.plain.test\r\nConnection: Content-Length\r\n"
                    b"Content-Length: 5\r\n\r\nhello", 400, "Connection: Content-Length")


def cut_by_reset(tls, tunnel=False):
    """Item 11: a close-delimited body the origin ends with a reset reaches the client cut (a reset; no TLS
    close_notify), as it would directly, never as a complete response; through a raw tunnel (bytes after CONNECT
    that are not TLS) too."""
    def check(env):
        host = b"hy10.tls.test" if tls else b"hy10.plain.test"
        if tunnel:
            sock, target = env.proxy.connect_tunnel(host.decode(), port=80), lambda p: p
        else:
            sock, target = client_for(env, tls, host, strict_eof=True)
        data, ending = b"", None
        with sock:
            sock.sendall(b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target(b"/cut-reset"), host))
            sock.settimeout(10)
            try:
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        ending = "a clean end"
                        break
                    data += chunk
            except socket.timeout:
                ending = "nothing within 10 s"
            except (ConnectionResetError, ssl.SSLError) as e:
                ending = "cut (%s)" % type(e).__name__
        harness.ensure(data.startswith(b"HTTP/1.1 200"), "the client got %r" % data[:60])
        harness.ensure(ending.startswith("cut"), "a response the origin reset reached the client with %s: %r"
                       % (ending, data[-40:]))

    return check


def early_bytes_capped(env):
    """Item 10: while the upstream connects or handshakes, the proxy holds at most 64 KiB of the client's early bytes
    and then stops reading it, as a tunnel does: 64 MiB sent behind a ClientHello must not all be taken in."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    hello = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="early.silent.test")
    try:
        hello.do_handshake()
    except ssl.SSLWantReadError:
        pass
    rss_before = env.proxy.rss_kib()
    sent, junk = 0, b"\x17\x03\x03\x40\x00" + b"x" * 0x4000
    with env.proxy.connect_tunnel("early.silent.test") as sock:
        sock.sendall(outgoing.read())
        sock.settimeout(3)
        try:
            while sent < 64 << 20:
                sent += sock.send(junk)
        except (socket.timeout, ConnectionResetError, BrokenPipeError):
            pass
        growth = (env.proxy.rss_kib() - rss_before) // 1024
    harness.ensure(sent < 64 << 20, "the proxy took in all %d MiB while the upstream was silent (RSS +%d MiB)"
                   % (sent >> 20, growth))
    return "took %d MiB (socket buffers) before it stopped reading; RSS +%d MiB" % (sent >> 20, growth)


def proxy_args(env):
    # An upstream that completes TCP and never answers the TLS handshake (a listener nobody accepts on).
    env.silent = socket.socket()
    env.silent.bind(("127.0.0.1", 0))
    env.silent.listen(64)
    return ["--map", "*.silent.test=127.0.0.1:%d" % env.silent.getsockname()[1]]


CHECKS = [
    ("h2c-upgrade-plain", h2c_upgrade(False), 20),
    ("h2c-upgrade-intercepted", h2c_upgrade(True), 20),
    ("h2c-extended-connect", h2c_extended_connect, 20),
    ("h2-authority-userinfo", h2_authority(b"user@hy3.tls.test", None, ":authority with userinfo"), 20),
    ("h2-authority-and-other-host", h2_authority(b"hy3.tls.test", b"other.tls.test", ":authority with another host"),
     20),
    ("absolute-form-other-host-in-tunnel", absolute_form_in_tunnel(True), 20),
    ("absolute-form-same-host-in-tunnel", absolute_form_in_tunnel(False), 20),
    ("host-list-plain", invalid_host(False), 20),
    ("host-list-intercepted", invalid_host(True), 20),
    ("te-identity-chunked", transfer_coding(b"identity, chunked"), 20),
    ("te-gzip-chunked", transfer_coding(b"gzip, chunked"), 20),
    ("chunked-to-http10-plain", chunked_to_http10(False), 20),
    ("chunked-to-http10-intercepted", chunked_to_http10(True), 20),
    ("connection-nominated-fields-plain", connection_nominated(False), 20),
    ("connection-nominated-fields-intercepted", connection_nominated(True), 20),
    ("connection-names-content-length", connection_names_framing, 20),
    ("cut-by-reset-plain", cut_by_reset(False), 20),
    ("cut-by-reset-intercepted", cut_by_reset(True), 20),
    ("cut-by-reset-raw-tunnel", cut_by_reset(False, tunnel=True), 20),
    ("early-bytes-capped-while-upstream-handshakes", early_bytes_capped, 30),
]
