"""Family 8: proxy credential probes with --auth. Every request without valid Basic credentials gets 407 (they are
per request, RFC 9110 11.7.1), and the password never appears in stderr with --diagnostics 3 nor in --log-json."""

import base64
import os
import time

import harness

USER = "adv"
PASSWORD = "s3cret-Pw-7c1e9a"


def creds(user, password):
    return b"Proxy-Authorization: Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()) + b"\r\n"


def get(host, auth):
    return b"GET http://%s/good HTTP/1.1\r\nHost: %s\r\n" % (host, host) + auth + b"\r\n"


def refused(env, request, what):
    mark = env.origin.mark()
    with env.proxy.connect() as sock:
        status, fields, _, _ = harness.exchange(sock, request)
    harness.ensure(status == 407, "%s was answered %d, not 407" % (what, status))
    harness.ensure(any(n == b"proxy-authenticate" for n, _ in fields), "a 407 without Proxy-Authenticate")
    harness.ensure(not env.origin.requests(mark), "%s reached the origin" % what)


def missing(env):
    refused(env, get(b"a1.plain.test", b""), "a request without credentials")


def wrong(env):
    refused(env, get(b"a2.plain.test", creds(USER, PASSWORD[:-1] + "X")), "a wrong password")


def wrong_length(env):
    refused(env, get(b"a3.plain.test", creds(USER, PASSWORD + "-and-more")), "a longer password")
    refused(env, get(b"a3.plain.test", creds(USER, "")), "an empty password")
    refused(env, get(b"a3.plain.test", creds(USER + "x", PASSWORD)), "a wrong user name")


def malformed_credentials(env):
    for value in [b"Basic", b"Basic !!!!", b"Bearer abc", b"Basic " + base64.b64encode(USER.encode()),
                  b"basic  " + base64.b64encode(("%s:%s" % (USER, PASSWORD + "x")).encode()), b"Basic " + b"A" * 9000]:
        refused(env, get(b"a4.plain.test", b"Proxy-Authorization: " + value + b"\r\n"), "credentials %r" % value[:30])


def connect_without(env):
    mark = env.tls_origin.mark()
    with env.proxy.connect() as sock:
        status, _, _, _ = harness.exchange(sock, b"CONNECT a5.tls.test:443 HTTP/1.1\r\nHost: a5.tls.test:443\r\n\r\n")
    harness.ensure(status == 407, "a CONNECT without credentials was answered %d" % status)
    harness.ensure(not env.tls_origin.mark() > mark, "a CONNECT without credentials reached the origin")


def keep_alive_second_request(env):
    mark = env.origin.mark()
    with env.proxy.connect() as sock:
        status, _, body, _ = harness.exchange(sock, get(b"a6.plain.test", creds(USER, PASSWORD)))
        harness.ensure(status == 200, "the first request, with valid credentials, got %d %r" % (status, body[:60]))
        statuses = []
        for request in [get(b"a6other.plain.test", b""), get(b"a6.plain.test", creds(USER, "wrong")),
                        get(b"a6.plain.test", b"")]:
            try:
                status, _, _, _ = harness.exchange(sock, request)
            except harness.CheckFailed as e:
                if "closed without a response" not in str(e):
                    raise
                break
            statuses.append(status)
    forwarded = [(r[2], r[1].decode()) for r in env.origin.requests(mark)]
    harness.ensure(statuses == [407] * len(statuses) and len(forwarded) == 1,
                   "later requests on a keep-alive connection without valid credentials were answered %r and the "
                   "origin received %r" % (statuses, forwarded))


def password_not_printed(env):
    # Give every path that prints something a reason to: a 200, a 407 with wrong credentials, a CONNECT.
    with env.proxy.connect() as sock:
        harness.exchange(sock, get(b"a7.plain.test", creds(USER, PASSWORD)))
    with env.proxy.tls_client("a7.tls.test", env.proxy_ca) as tls:
        harness.exchange(tls, b"GET /good HTTP/1.1\r\nHost: a7.tls.test\r\n\r\n")
    refused(env, get(b"a7.plain.test", creds(USER, PASSWORD + "x")), "a wrong password")
    # Records are written in batches: wait until the JSON log has the last exchange (a 407 for a7).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(log_path(env), "rb") as f:
            if f.read().count(b"a7.plain.test") >= 2:
                break
        time.sleep(0.05)
    secrets = [PASSWORD.encode(), base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()),
               base64.b64encode(("%s:%s" % (USER, PASSWORD + "x")).encode())]
    found = []
    for label, path in [("stderr (--diagnostics 3)", env.proxy.stderr_path), ("stdout", env.proxy.stdout_path),
                        ("--log-json", log_path(env))]:
        with open(path, "rb") as f:
            text = f.read()
        for secret in secrets:
            at = text.find(secret)
            if at >= 0:
                line_start = text.rfind(b"\n", 0, at) + 1
                found.append("%s: %r" % (label, text[line_start:at + len(secret)][-120:]))
    harness.ensure(not found, "the password (or its Basic encoding) was printed: " + "; ".join(found[:3]))


def log_path(env):
    return os.path.join(env.folder, "credentials.jsonl")


def proxy_args(env):
    return ["--auth", "%s:%s" % (USER, PASSWORD), "--diagnostics", "3", "--log-json", log_path(env)]


AUTH = "%s:%s" % (USER, PASSWORD)
CHECKS = [
    ("missing-credentials-407", missing, 15),
    ("wrong-password-407", wrong, 15),
    ("wrong-length-and-user-407", wrong_length, 15),
    ("malformed-credentials-407", malformed_credentials, 15),
    ("connect-without-credentials-407", connect_without, 15),
    ("keep-alive-second-request-without-credentials-407", keep_alive_second_request, 15),
    ("password-not-in-diagnostics-or-json-log", password_not_printed, 30),
]
