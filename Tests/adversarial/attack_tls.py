"""Family 3: garbage TLS after CONNECT, and hostile TLS upstreams."""

import random
import ssl

import harness

LONG_HOST = ".".join(c * 60 for c in "abcde") + ".tls.test"  # 309 bytes: over the 255 a DNS name may have


def client_hello(host):
    """The ClientHello Python's OpenSSL sends for `host` (None: no SNI)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname=host)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def expect_closed(sock, seconds, what):
    took = harness.wait_closed(sock, seconds)
    harness.ensure(took is not None, "%s: the proxy still held the connection after %d s" % (what, seconds))


def random_bytes(env):
    rng = random.Random(3)
    with env.proxy.connect_tunnel("rnd.tls.test") as sock:
        sock.sendall(bytes(rng.getrandbits(8) for _ in range(8192)))
        # Non-TLS bytes are tunnelled by design; the TLS origin then fails its handshake and closes.
        expect_closed(sock, 10, "random bytes after CONNECT")


def record_header_then_garbage(env):
    rng = random.Random(4)
    with env.proxy.connect_tunnel("rec.tls.test") as sock:
        sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc" + bytes(rng.getrandbits(8) for _ in range(508)))
        expect_closed(sock, 10, "a handshake record of garbage")


def truncated_client_hello(env):
    hello = client_hello("trunc.tls.test")
    with env.proxy.connect_tunnel("trunc.tls.test") as sock:
        sock.sendall(hello[:len(hello) // 2])
        sock.shutdown(2 - 1)  # SHUT_WR: the client will send nothing more
        expect_closed(sock, 10, "half a ClientHello, then FIN")


def oversized_client_hello_length(env):
    hello = bytearray(client_hello("big.tls.test"))
    hello[3:5] = b"\xff\xff"  # a record length of 65535 (over TLS's 16 KiB + 2048)
    with env.proxy.connect_tunnel("big.tls.test") as sock:
        sock.sendall(bytes(hello) + b"\x00" * 20000)
        expect_closed(sock, 10, "a ClientHello record claiming 65535 bytes")


def no_sni_long_host(env):
    """The remote double free: CONNECT to a name over 255 bytes under a wildcard --map, then no SNI."""
    with env.proxy.connect_tunnel(LONG_HOST) as sock:
        sock.sendall(client_hello(None))
        harness.wait_closed(sock, 5)
    harness.ensure(env.proxy.alive(), "the proxy died: " + env.proxy.exit_description())


def no_sni_long_host_repeated(env):
    for _ in range(20):
        with env.proxy.connect_tunnel(LONG_HOST) as sock:
            sock.sendall(client_hello(None))
            harness.wait_closed(sock, 5)
        harness.ensure(env.proxy.alive(), "the proxy died: " + env.proxy.exit_description())


def long_sni(env):
    """A ClientHello whose SNI is the 309-byte name itself (OpenSSL does not check the length it sends)."""
    try:
        hello = client_hello(LONG_HOST)
    except (ValueError, ssl.SSLError):
        hello = client_hello(None)
    with env.proxy.connect_tunnel(LONG_HOST) as sock:
        sock.sendall(hello)
        harness.wait_closed(sock, 5)


def hostile_upstream(mode):
    def check(env):
        host = mode + ".bad.test"
        ctx = ssl.create_default_context(cafile=env.proxy_ca)
        sock = env.proxy.connect_tunnel(host, timeout=20)
        try:
            tls = ctx.wrap_socket(sock, server_hostname=host)
        except (ssl.SSLError, ConnectionResetError):
            return  # refused in the client's handshake, as --block tls does
        except OSError as e:
            raise harness.CheckFailed("the client's handshake ended with %r" % e)
        with tls:
            try:
                status, _, body, _ = harness.exchange(tls, b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode(), 20)
            except harness.CheckFailed as e:
                if "closed without a response" in str(e):
                    return
                raise
        harness.ensure(status == 502, "a hostile upstream (%s) was answered %d %r" % (mode, status, body[:60]))

    return check


def proxy_args(env):
    return ["--handshake-timeout", "5"]


CHECKS = [
    ("random-bytes-after-connect", random_bytes, 20),
    ("handshake-record-of-garbage", record_header_then_garbage, 20),
    ("truncated-client-hello-then-fin", truncated_client_hello, 20),
    ("client-hello-record-length-65535", oversized_client_hello_length, 20),
    ("no-sni-after-connect-to-309-byte-host", no_sni_long_host, 20),
    ("no-sni-309-byte-host-20-times", no_sni_long_host_repeated, 60),
    ("sni-of-309-bytes", long_sni, 20),
    ("upstream-garbage-after-server-hello", hostile_upstream("garbage-after-sh"), 30),
    ("upstream-garbage-instead-of-server-hello", hostile_upstream("garbage"), 30),
    ("upstream-half-flight-then-fin", hostile_upstream("half-flight"), 30),
]
