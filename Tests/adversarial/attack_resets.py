"""Family 6: clients and upstreams that reset (TCP RST) mid-head, mid-body and mid-handshake."""

import random
import ssl
import time

import harness
from attack_tls import client_hello, hostile_upstream


def client_mid_head(env):
    mark = env.origin.mark()
    sock = env.proxy.connect()
    sock.sendall(b"GET http://rs1.plain.test/x HTTP/1.1\r\nHost: rs1.pl")
    time.sleep(0.2)
    harness.rst_close(sock)
    time.sleep(0.3)
    seen = env.origin.requests(mark, "rs1.plain.test")
    harness.ensure(not seen, "half a head reached the origin as %r" % seen)


def client_mid_body(env):
    mark = env.origin.mark()
    sock = env.proxy.connect()
    sock.sendall(b"POST http://rs2.plain.test/upload HTTP/1.1\r\nHost: rs2.plain.test\r\nContent-Length: 10000\r\n\r\n"
                 + b"b" * 1000)
    time.sleep(0.3)
    harness.rst_close(sock)
    time.sleep(0.5)
    seen = env.origin.requests(mark, "rs2.plain.test")
    harness.ensure(not seen, "a request whose client reset mid-body reached the origin complete: %r" % seen)


def client_mid_handshake(env):
    hello = client_hello("rs3.tls.test")
    sock = env.proxy.connect_tunnel("rs3.tls.test")
    sock.sendall(hello[:len(hello) // 2])
    time.sleep(0.2)
    harness.rst_close(sock)


def client_after_server_hello(env):
    sock = env.proxy.connect_tunnel("rs4.tls.test")
    sock.sendall(client_hello("rs4.tls.test"))
    sock.settimeout(10)
    first = sock.recv(5)
    harness.ensure(first[:1] == b"\x16", "the proxy answered a ClientHello with %r" % first)
    harness.rst_close(sock)


def client_mid_intercepted_body(env):
    mark = env.tls_origin.mark()
    tls = env.proxy.tls_client("rs5.tls.test", env.proxy_ca)
    tls.sendall(b"POST /upload HTTP/1.1\r\nHost: rs5.tls.test\r\nContent-Length: 100000\r\n\r\n" + b"b" * 5000)
    time.sleep(0.3)
    harness.rst_close(tls)
    time.sleep(0.5)
    seen = env.tls_origin.requests(mark, "rs5.tls.test")
    harness.ensure(not seen, "a request whose client reset mid-body reached the origin complete: %r" % seen)


def many_random_resets(env):
    """300 clients, each reset at a random byte of a valid plain or CONNECT exchange (seeded)."""
    rng = random.Random(6)
    plain = (b"POST http://rs6.plain.test/upload HTTP/1.1\r\nHost: rs6.plain.test\r\nContent-Length: 64\r\n\r\n"
             + b"p" * 64)
    tunnel = b"CONNECT rs6.tls.test:443 HTTP/1.1\r\nHost: rs6.tls.test:443\r\n\r\n" + client_hello("rs6.tls.test")
    for i in range(300):
        data = plain if i % 2 else tunnel
        sock = env.proxy.connect()
        sock.sendall(data[:rng.randrange(1, len(data))])
        if rng.random() < 0.5:
            time.sleep(0.005)
        harness.rst_close(sock)
    return "300 connections reset mid-exchange"


def upstream_reset(path, tls):
    def check(env):
        host = "ur.tls.test" if tls else "ur.plain.test"
        if tls:
            sock = env.proxy.tls_client(host, env.proxy_ca)
            request = b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path.encode(), host.encode())
        else:
            sock = env.proxy.connect()
            request = b"GET http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (host.encode(), path.encode(), host.encode())
        with sock:
            try:
                status, _, body, _ = harness.exchange(sock, request, 15)
            except harness.CheckFailed as e:
                if path == "/reset-body" and "inside a response's body" in str(e):
                    return "the client saw the head, then the connection closed before the body's end"
                raise
            except (ConnectionResetError, ssl.SSLError) as e:
                # The origin's reset passed on as a reset: the client sees the body cut, as it would directly.
                if path == "/reset-body":
                    return "the client saw the head, then its connection was reset (%s)" % type(e).__name__
                raise
        harness.ensure(status == 502, "an upstream reset (%s) reached the client as %d with %d body bytes"
                       % (path, status, len(body)))

    return check


def proxy_args(env):
    return ["--handshake-timeout", "5"]


CHECKS = [
    ("client-reset-mid-head", client_mid_head, 15),
    ("client-reset-mid-body", client_mid_body, 15),
    ("client-reset-mid-client-hello", client_mid_handshake, 15),
    ("client-reset-after-server-hello", client_after_server_hello, 15),
    ("client-reset-mid-intercepted-body", client_mid_intercepted_body, 15),
    ("300-clients-reset-at-random-points", many_random_resets, 60),
    ("upstream-reset-mid-head", upstream_reset("/reset-head", False), 20),
    ("upstream-reset-mid-body", upstream_reset("/reset-body", False), 20),
    ("upstream-reset-mid-head-intercepted", upstream_reset("/reset-head", True), 20),
    ("upstream-reset-mid-body-intercepted", upstream_reset("/reset-body", True), 20),
    ("upstream-reset-mid-handshake", hostile_upstream("reset-handshake"), 30),
]
