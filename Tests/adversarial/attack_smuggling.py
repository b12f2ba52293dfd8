"""Family 2: request smuggling through ambiguous framing, in requests (the origin must receive one request with one
unambiguous framing, or nothing while the client gets 400) and in responses from a hostile origin (the client must
get 502, or one response with one normalised framing and nothing else)."""

import harness

SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: smuggled.plain.test\r\n\r\n"

# (name, framing fields, body): each is one request as its sender meant it, with a body that is itself a request.
REQUEST_VARIANTS = [
    ("cl-then-empty-cl", [b"Content-Length: %d" % len(SMUGGLED), b"Content-Length: "], SMUGGLED),
    ("empty-cl-then-cl", [b"Content-Length: ", b"Content-Length: %d" % len(SMUGGLED)], SMUGGLED),
    ("cl-list-same", [b"Content-Length: %d,%d" % (len(SMUGGLED), len(SMUGGLED))], SMUGGLED),
    ("cl-list-empty-element", [b"Content-Length: %d," % len(SMUGGLED)], SMUGGLED),
    ("cl-twice-same", [b"Content-Length: %d" % len(SMUGGLED)] * 2, SMUGGLED),
    ("cl-twice-different", [b"Content-Length: 0", b"Content-Length: %d" % len(SMUGGLED)], SMUGGLED),
    ("cl-and-te", [b"Content-Length: 4", b"Transfer-Encoding: chunked"], b"0\r\n\r\n" + SMUGGLED),
    ("te-and-cl", [b"Transfer-Encoding: chunked", b"Content-Length: 4"], b"0\r\n\r\n" + SMUGGLED),
    ("te-chunked-identity", [b"Transfer-Encoding: chunked, identity"], b"0\r\n\r\n" + SMUGGLED),
    ("te-leading-space", [b"Transfer-Encoding:  chunked"], b"0\r\n\r\n" + SMUGGLED),
    ("te-obs-fold-line", [b"X-Filler: a", b" Transfer-Encoding: chunked"], b"0\r\n\r\n" + SMUGGLED),
    ("te-xchunked", [b"Transfer-Encoding: xchunked"], b"0\r\n\r\n" + SMUGGLED),
    ("te-chunked-twice", [b"Transfer-Encoding: chunked", b"Transfer-Encoding: chunked"], b"0\r\n\r\n" + SMUGGLED),
    ("te-space-before-colon", [b"Transfer-Encoding : chunked"], b"0\r\n\r\n" + SMUGGLED),
    ("te-vertical-tab", [b"Transfer-Encoding:\x0bchunked"], b"0\r\n\r\n" + SMUGGLED),
    ("te-empty-and-cl", [b"Transfer-Encoding: ", b"Content-Length: %d" % len(SMUGGLED)], SMUGGLED),
    ("te-chunked-cl-zero", [b"Transfer-Encoding: chunked", b"Content-Length: 0"], b"0\r\n\r\n" + SMUGGLED),
]

POISON_BODY = b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nsmuggled"

# (name, raw response): what a hostile origin answers; a second response hides where one framing ends.
RESPONSE_VARIANTS = [
    ("cl-then-empty-cl", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: \r\n\r\n" + POISON_BODY),
    ("empty-cl-then-cl", b"HTTP/1.1 200 OK\r\nContent-Length: \r\nContent-Length: %d\r\n\r\n" % len(POISON_BODY)
     + POISON_BODY),
    ("cl-list-same", b"HTTP/1.1 200 OK\r\nContent-Length: 5,5\r\n\r\nhello" + POISON_BODY),
    ("cl-twice-different", b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: %d\r\n\r\n" % len(POISON_BODY)
     + POISON_BODY),
    ("cl-and-te", b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
     % (5 + len(POISON_BODY)) + POISON_BODY),
    ("te-chunked-identity", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n"
     + POISON_BODY),
    ("te-xchunked", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n"
     + POISON_BODY),
    ("te-obs-fold", b"HTTP/1.1 200 OK\r\nX-A: b\r\n Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
     b"0\r\n\r\n" + POISON_BODY),
]


def request_check(index):
    name, framing, body = REQUEST_VARIANTS[index]
    host = b"s%d.plain.test" % index

    def check(env):
        mark = env.origin.mark()
        head = [b"POST http://" + host + b"/upload HTTP/1.1", b"Host: " + host] + framing
        with env.proxy.connect(10) as sock:
            sock.sendall(b"\r\n".join(head) + b"\r\n\r\n" + body)
            data, _ = harness.recv_until_closed(sock, 3)
        status = data[9:12]
        harness.ensure(data.startswith(b"HTTP/1."), "the client got %r" % data[:80])
        bad = env.origin.violations(mark)
        harness.ensure(not bad, "ambiguous framing reached the origin: %s" % "; ".join(bad[:2]))
        seen = [(r[0], r[1]) for r in env.origin.requests(mark)]
        harness.ensure((b"GET", b"/smuggled") not in seen,
                       "the origin received a second request (the body) from one client request: %r (client got %s)"
                       % (seen, status))
        harness.ensure(len(seen) <= 1, "one client request arrived as %d: %r" % (len(seen), seen))
        if not seen:
            # 501 is RFC 9112's answer to a transfer coding the server does not implement.
            harness.ensure(status in (b"400", b"501"), "refused without forwarding, but answered %r" % status)

    return ("request-" + name, check, 20)


def response_check(index):
    name, raw = RESPONSE_VARIANTS[index]

    def check(env):
        env.origin.response_variants = [r for _, r in RESPONSE_VARIANTS]
        host = b"r%d.plain.test" % index
        with env.proxy.connect(10) as sock:
            sock.sendall(b"GET http://%s/resp/%d HTTP/1.1\r\nHost: %s\r\n\r\n" % (host, index, host))
            # The origin sends its bytes at once and closes 0.3 s later: wait for all the proxy makes of them.
            data, closed = harness.recv_until_closed(sock, 1.5)
            harness.ensure(data.startswith(b"HTTP/1.1 "), "the client got %r" % data[:80])
            if data[9:12] == b"502":
                return
            try:
                got = harness.parse_response(data, eof=closed)
            except harness.Malformed as e:
                raise harness.CheckFailed("the client got %s instead of 502: %r" % (e, data[:160]))
            harness.ensure(got is not None, "the client got an incomplete response and no 502: %r" % data[:160])
            status, _, body, rest = got
            harness.ensure(not rest, "the client got a second response after the first (%d %r): %r"
                           % (status, body[:20], rest[:80]))
            if closed:
                return
            # Still open: the next request must get its own answer, not the hidden second response.
            try:
                status2, _, body2, _ = harness.exchange(
                    sock, b"GET http://%s/next HTTP/1.1\r\nHost: %s\r\n\r\n" % (host, host), 5)
            except harness.CheckFailed as e:
                if "closed without a response" in str(e):
                    return
                raise
            harness.ensure(body2.startswith(b"good:/next"), "the next request was answered %d %r (the first was "
                           "relayed as %d %r)" % (status2, body2[:40], status, body[:40]))

    return ("response-" + name, check, 20)


def proxy_args(env):
    return []


CHECKS = [request_check(i) for i in range(len(REQUEST_VARIANTS))] + \
         [response_check(i) for i in range(len(RESPONSE_VARIANTS))]
