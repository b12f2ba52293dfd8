"""Family 7: loops through the proxy itself. 2,000 pipelined CONNECTs (or absolute-form requests) to the proxy's own
address on one connection: the proxy must never connect to itself, its descriptor count must stay bounded, and a
second client must be served while the attacker's connection is still open. The proxy runs with a soft limit of
1,024 descriptors (a common default), the limit the issue's loop exhausted."""

import socket
import threading
import time

import harness

NOFILE = 1024
FRESH_PROXY = True  # a loop that succeeds leaves the proxy without descriptors: each check gets its own
FD_GROWTH_LIMIT = 100
COUNT = 2000
# What the proxy answers a request that is not a proxy request (origin-form), as the proxy's own upstream would get.
ORIGIN_FORM_ANSWER = b"ATSProxy is a proxy: configure it"


def attack(env, make_head, what):
    proxy = env.proxy
    baseline = proxy.fd_count()
    head = make_head(proxy.port)
    sock = proxy.connect(10)
    sock.settimeout(5)
    stop = threading.Event()
    answers = bytearray()

    def drain():  # read the answers so that the proxy is never held up writing them
        while not stop.is_set():
            try:
                chunk = sock.recv(65536)
                if not chunk:
                    return
                if len(answers) < 1 << 20:
                    answers.extend(chunk)
            except socket.timeout:
                continue
            except OSError:
                return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        try:
            sock.sendall(head * COUNT)
        except (socket.timeout, BrokenPipeError, ConnectionResetError):
            pass  # the proxy stopped reading or closed: what a defence may do
        max_fds, max_self = baseline, 0
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and proxy.alive():
            max_fds = max(max_fds, proxy.fd_count())
            max_self = max(max_self, proxy.self_connections())
            time.sleep(0.05)
        served = None
        try:
            harness.good_client(proxy, env.proxy_ca)
        except harness.CHECK_ERRORS as e:
            served = str(e)
    finally:
        stop.set()
        sock.close()
        reader.join(10)
    # Once the attacker has left, what it made the proxy open must be released.
    released_fds = proxy.fd_count() if proxy.alive() else 0
    deadline = time.monotonic() + 10
    while proxy.alive() and released_fds - baseline > 10 and time.monotonic() < deadline:
        time.sleep(0.1)
        released_fds = proxy.fd_count()
    harness.ensure(proxy.alive(), "the proxy died: " + proxy.exit_description())
    problems = []
    if served is not None:
        problems.append("while it was held open a second client was not served: " + served)
    if max_self:
        problems.append("the proxy connected to its own listening port (%d connections to itself at once)" % max_self)
    if ORIGIN_FORM_ANSWER in answers:
        problems.append("the attacker got the proxy's answer to an origin-form request, which only a request the "
                        "proxy forwarded to itself can have been")
    if max_fds - baseline > FD_GROWTH_LIMIT:
        problems.append("descriptors went from %d to %d" % (baseline, max_fds))
    if released_fds - baseline > 10:
        problems.append("10 s after the attacker left the proxy still held %d descriptors" % released_fds)
    harness.ensure(not problems, "%s: %s" % (what, "; ".join(problems)))
    return "descriptors %d, at most %d during the attack" % (baseline, max_fds)


def connect_heads(host_form):
    def make(port):
        target = (host_form % port).encode()
        return b"CONNECT " + target + b" HTTP/1.1\r\nHost: " + target + b"\r\n\r\n"

    return make


def absolute_heads(port):
    return b"GET http://127.0.0.1:%d/ HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (port, port)


def check(make_head, what):
    return lambda env: attack(env, make_head, what)


def proxy_args(env):
    return []


CHECKS = [
    ("connect-127.0.0.1-self-x2000", check(connect_heads("127.0.0.1:%d"), "2,000 CONNECTs to 127.0.0.1"), 60),
    ("connect-ipv4-mapped-self-x2000", check(connect_heads("[::ffff:127.0.0.1]:%d"),
                                             "2,000 CONNECTs to [::ffff:127.0.0.1]"), 60),
    ("connect-localhost-self-x2000", check(connect_heads("localhost:%d"), "2,000 CONNECTs to localhost"), 60),
    ("absolute-form-get-self-x2000", check(absolute_heads, "2,000 GET http://127.0.0.1:<port>/"), 60),
]
