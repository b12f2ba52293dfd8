"""Family 9: unsolicited upstream bytes. An origin that sends a second, unrequested response after the first must
not have it served as the answer to the client's next request; an unsolicited 101 is answered 502."""

import time

import harness


def second_response(tls, path=b"/unsolicited"):
    def check(env):
        host = b"un1.tls.test" if tls else b"un1.plain.test"
        if tls:
            sock = env.proxy.tls_client(host.decode(), env.proxy_ca)
            first, second = b"GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host), \
                b"GET /next HTTP/1.1\r\nHost: %s\r\n\r\n" % host
        else:
            sock = env.proxy.connect()
            first = b"GET http://%s%s HTTP/1.1\r\nHost: %s\r\n\r\n" % (host, path, host)
            second = b"GET http://%s/next HTTP/1.1\r\nHost: %s\r\n\r\n" % (host, host)
        env.origin_for(tls).unsolicited_sent.clear()
        with sock:
            status, _, body, rest = harness.exchange(sock, first)
            harness.ensure(status == 200 and body == b"first", "the first request got %d %r" % (status, body[:40]))
            # Ask again only once the origin has sent its unrequested response, and the proxy had 0.2 s to read it
            # (nothing the client can observe says when it has).
            harness.ensure(env.origin_for(tls).unsolicited_sent.wait(5), "the origin never sent its second response")
            time.sleep(0.2)
            harness.ensure(not rest, "bytes after the first response: %r" % rest[:60])
            try:
                status, _, body, _ = harness.exchange(sock, second)
            except harness.CheckFailed as e:
                if "closed without a response" in str(e):
                    return "the proxy closed the client connection"
                raise
        harness.ensure(body != b"poisoned", "the client's next request was answered with the upstream's unrequested "
                       "second response (%d %r)" % (status, body))
        harness.ensure(status == 200 and body.startswith(b"good:/next"), "the next request got %d %r"
                       % (status, body[:40]))

    return check


def unsolicited_101(tls):
    def check(env):
        host = b"un2.tls.test" if tls else b"un2.plain.test"
        if tls:
            sock = env.proxy.tls_client(host.decode(), env.proxy_ca)
            request = b"GET /101 HTTP/1.1\r\nHost: %s\r\n\r\n" % host
        else:
            sock = env.proxy.connect()
            request = b"GET http://%s/101 HTTP/1.1\r\nHost: %s\r\n\r\n" % (host, host)
        with sock:
            sock.sendall(request)
            data, _ = harness.recv_until_closed(sock, 3)
        harness.ensure(data.startswith(b"HTTP/1.1 502"), "a 101 the client did not ask for reached it as %r"
                       % data[:120])
        harness.ensure(b"raw bytes after" not in data, "the client got the upstream's raw bytes after a 101: %r"
                       % data[:160])

    return check


def proxy_args(env):
    return []


CHECKS = [
    ("second-unrequested-response-plain", second_response(False), 20),
    ("second-unrequested-response-intercepted", second_response(True), 20),
    ("second-response-in-the-same-write-plain", second_response(False, b"/unsolicited-together"), 20),
    ("second-response-in-the-same-write-intercepted", second_response(True, b"/unsolicited-together"), 20),
    ("unsolicited-101-plain", unsolicited_101(False), 20),
    ("unsolicited-101-intercepted", unsolicited_101(True), 20),
]
