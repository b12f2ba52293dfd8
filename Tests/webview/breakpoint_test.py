#!/usr/bin/env python3
"""Breakpoints end to end (issue 34): `atsproxy run --breakpoint 'text:/held' --web 127.0.0.1:0`, curl through it
to a local TLS origin on 127.0.0.1, each held request released through the web view's API (GET /api/held,
POST /api/held/ID, with the page's same-origin headers). Checks: a request the filter does not match goes on at
once; a held request (HTTPS or plain HTTP) is listed and does not reach the origin until released; executed with an edited header, the
origin gets the edit; answered, curl gets the answer and the origin nothing; aborted, curl's connection fails
(the app's -1005) and the origin gets nothing; unreleased, it goes on unchanged after --breakpoint-timeout and
leaves the list; each record (the web view's exchange detail) says how it was released, and an edited one keeps
both heads (request and forwardedRequest). A held response (`--breakpoint response:text:/late`): the origin got the
request, curl waits until the release; changed to 503 with a header and a body, curl gets exactly that, and the
record keeps the origin's response and the client's (clientResponse); a plain-HTTP response is held and executed
as it came; an aborted response resets curl's connection. Exits 1 on the first failed check, naming it; every wait is bounded (the whole run too) and every
process it started is stopped.

    breakpoint_test.py --atsproxy .build/debug/atsproxy
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_test import Failed, Session, check  # noqa: E402

OVERALL_SECONDS = 120
TIMEOUT = 4


def start_curl(session, url, extra=()):
    """curl for `url` through the proxy, in the background: (process, its output file)."""
    out = tempfile.NamedTemporaryFile(prefix="curl-", dir=session.folder, delete=False)
    process = subprocess.Popen(
        ["curl", "-sS", "-m", "30", "-x", "http://127.0.0.1:%d" % session.port, "--cacert", session.proxy_ca,
         "-w", "\n%{http_code}", *extra, url], stdout=out, stderr=subprocess.STDOUT)
    return process, out.name


def finish_curl(process, path):
    """curl's exit status and output, once it ends (bounded)."""
    code = process.wait(timeout=40)
    return code, open(path, "rb").read().decode("utf-8", "replace")


def api(session, path, body=None):
    """(status, JSON) of a web view API call; a POST carries the page's own same-origin headers."""
    origin = session.web.rstrip("/")
    request = urllib.request.Request(origin + path)
    if body is not None:
        request.data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
        request.add_header("Origin", origin)
        request.add_header("Sec-Fetch-Site", "same-origin")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def held(session, path_part, seconds=15):
    """The one held exchange whose URL holds `path_part`, waited for."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, listing = api(session, "/api/held")
        if status != 200:
            raise Failed("GET /api/held answered %r" % (status,))
        found = [h for h in listing["held"] if path_part in h["url"]]
        if found:
            return found[0]
        time.sleep(0.05)
    raise Failed("no held exchange for %s within %d s" % (path_part, seconds))


def recorded(session, path, seconds=15):
    """The web view's detail of the exchange whose URL ends with `path`, waited for (the capture is written a
    moment after the exchange ends)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        status, listing = api(session, "/api/exchanges")
        found = [e for e in (listing or {}).get("exchanges", []) if e["url"].endswith(path)] if status == 200 else []
        if found:
            status, detail = api(session, "/api/exchanges/%d" % found[0]["id"])
            if status == 200:
                return detail
        time.sleep(0.1)
    raise Failed("no record of %s within %d s" % (path, seconds))


def breakpoint_notes(detail):
    return [r.get("note") for r in detail["exchange"].get("rules") or [] if r.get("action") == "breakpoint"]


def run(args):
    folder = tempfile.mkdtemp(prefix="atsproxy-breakpoint-")
    session = None
    try:
        # ATS off: a cleartext request is forwarded (ATS would block it, and a block answer is never held).
        session = Session(args, folder, ["--breakpoint", "request:text:/held",
                                         "--breakpoint", "response:text:/late",
                                         "--breakpoint-timeout", str(TIMEOUT), "--ats", "off"])
        origin = session.tls_origin

        # Not matched: straight through.
        process, out = start_curl(session, "https://www.tls.test/free")
        code, text = finish_curl(process, out)
        check(code == 0 and text.endswith("\n200"), "a request the filter does not match goes on: %r" % text[-80:])

        # Executed with an edited header: the origin sees nothing until the release, then the edit.
        mark = origin.mark()
        process, out = start_curl(session, "https://www.tls.test/held/execute")
        entry = held(session, "/held/execute")
        check(entry["phase"] == "request" and entry["method"] == "GET" and entry["breakpoint"] == "--breakpoint #1",
              "the held request is listed with its phase and rule: %r" % {k: entry[k] for k in ("phase", "method")})
        check(entry["deadline"] - entry["heldAt"] == TIMEOUT, "its deadline is --breakpoint-timeout away")
        check(origin.requests(mark) == [], "the held request did not reach the origin")
        headers = entry["request"]["headers"] + [["X-Edited", "by the breakpoint test"]]
        status, answer = api(session, "/api/held/%d" % entry["id"],
                             {"action": "execute", "request": {"headers": headers}})
        check(status == 200, "the release is accepted: %r %r" % (status, answer))
        code, text = finish_curl(process, out)
        check(code == 0 and text.endswith("\n200"), "curl gets the server's answer: %r" % text[-80:])
        heads = [h for c in origin.since(mark) for h in c["heads"]]
        check(len(heads) == 1 and any(name.lower() == b"x-edited" for name, _ in heads[0][2]),
              "the origin got the edited head: %r" % heads)
        detail = recorded(session, "/held/execute")
        notes = breakpoint_notes(detail)
        check(len(notes) == 1 and notes[0].startswith("held ") and notes[0].endswith(" s, executed edited"),
              "the record says it was held and executed edited: %r" % notes)
        edited = lambda head: any(n.lower() == "x-edited" for n, _ in (head or {}).get("headers", []))
        check(not edited(detail.get("request")) and edited(detail.get("forwardedRequest")),
              "the record keeps the app's head and the edited one (forwardedRequest)")
        status, _ = api(session, "/api/held/%d" % entry["id"], {"action": "abort"})
        check(status == 409, "a second release of the same hold is refused with 409: %r" % status)

        # Plain HTTP (the proxy's plain layer): held the same way, then executed as it came.
        mark = session.origin.mark()
        process, out = start_curl(session, "http://www.plain.test/held/plain")
        entry = held(session, "/held/plain")
        check(entry["url"] == "http://www.plain.test/held/plain", "a plain request is held: %r" % entry["url"])
        check(session.origin.requests(mark) == [], "the held plain request did not reach the origin")
        status, _ = api(session, "/api/held/%d" % entry["id"], {"action": "execute"})
        check(status == 200, "the plain request's release is accepted: %r" % status)
        code, text = finish_curl(process, out)
        check(code == 0 and text.endswith("\n200"), "curl gets the plain server's answer: %r" % text[-80:])

        # Answered: curl gets the person's response; the origin nothing.
        mark = origin.mark()
        process, out = start_curl(session, "https://www.tls.test/held/answer")
        entry = held(session, "/held/answer")
        status, _ = api(session, "/api/held/%d" % entry["id"],
                        {"action": "answer", "response": {"status": 418, "body": "short and stout"}})
        check(status == 200, "the answer is accepted: %r" % status)
        code, text = finish_curl(process, out)
        check(code == 0 and text == "short and stout\n418", "curl gets the answer: %r" % text)
        check(origin.requests(mark) == [], "an answered request never reaches the origin")

        # Aborted: curl's connection fails.
        mark = origin.mark()
        process, out = start_curl(session, "https://www.tls.test/held/abort")
        entry = held(session, "/held/abort")
        status, _ = api(session, "/api/held/%d" % entry["id"], {"action": "abort"})
        check(status == 200, "the abort is accepted: %r" % status)
        code, text = finish_curl(process, out)
        check(code != 0, "curl's request fails when aborted (exit %d): %r" % (code, text[-120:]))
        check(origin.requests(mark) == [], "an aborted request never reaches the origin")
        notes = breakpoint_notes(recorded(session, "/held/abort"))
        check(len(notes) == 1 and notes[0].endswith(" s, aborted"), "the record says it was aborted: %r" % notes)

        # Not released: on unchanged after the timeout, and off the list.
        mark = origin.mark()
        started = time.monotonic()
        process, out = start_curl(session, "https://www.tls.test/held/timeout")
        held(session, "/held/timeout")
        code, text = finish_curl(process, out)
        waited = time.monotonic() - started
        check(code == 0 and text.endswith("\n200"), "curl gets the server's answer after the timeout: %r" % text[-80:])
        check(waited >= TIMEOUT - 0.5, "the request waited the breakpoint timeout (%.1f s)" % waited)
        check([r[1] for r in origin.requests(mark)] == [b"/held/timeout"], "the origin got it unchanged")
        notes = breakpoint_notes(recorded(session, "/held/timeout"))
        check(notes and notes[0].startswith("timed out after") and notes[0].endswith("went on unchanged"),
              "the record says it timed out and went on unchanged: %r" % notes)
        status, listing = api(session, "/api/held")
        check(listing["held"] == [], "nothing is listed once it went on: %r" % listing["held"])

        # A held response, changed to 503 with a header and a body: curl gets exactly that.
        mark = origin.mark()
        process, out = start_curl(session, "https://www.tls.test/late/edit", extra=("-i",))
        entry = held(session, "/late/edit")
        check(entry["phase"] == "response" and entry["breakpoint"] == "--breakpoint #2"
              and (entry.get("response") or {}).get("status") == 200,
              "the held response is listed with its phase, rule and status: %r"
              % {k: entry.get(k) for k in ("phase", "breakpoint", "response")})
        check([r[1] for r in origin.requests(mark)] == [b"/late/edit"], "its request reached the origin")
        check(process.poll() is None, "curl still waits for the held response")
        status, answer = api(session, "/api/held/%d" % entry["id"],
                             {"action": "execute", "response": {"status": 503, "headers": [["X-Held", "yes"]],
                                                                "body": "held and changed"}})
        check(status == 200, "the response's release is accepted: %r %r" % (status, answer))
        code, text = finish_curl(process, out)
        # curl -i shows the proxy's CONNECT answer first.
        head, _, rest = text.split("Connection established\r\n\r\n", 1)[-1].partition("\r\n\r\n")
        fields = {line.split(":", 1)[0].strip().lower(): line.split(":", 1)[1].strip()
                  for line in head.split("\r\n")[1:] if ":" in line}
        check(code == 0 and rest == "held and changed\n503", "curl gets the changed response: %r" % text[-200:])
        check(fields.get("x-held") == "yes" and fields.get("content-length") == str(len("held and changed")),
              "with the added header and a Content-Length that fits: %r" % fields)
        detail = recorded(session, "/late/edit")
        notes = breakpoint_notes(detail)
        check(len(notes) == 1 and notes[0].startswith("response held ") and notes[0].endswith(" s, executed edited"),
              "the record says the response was held and executed edited: %r" % notes)
        check(" 200" in (detail.get("response") or {}).get("line", "")
              and " 503" in (detail.get("clientResponse") or {}).get("line", ""),
              "the record keeps the origin's 200 and the client's 503: %r / %r"
              % (detail.get("response"), detail.get("clientResponse")))

        # Plain HTTP (the plain layer): the response is held the same way, then executed as it came.
        process, out = start_curl(session, "http://www.plain.test/late/plain")
        entry = held(session, "/late/plain")
        check(entry["phase"] == "response" and entry["url"] == "http://www.plain.test/late/plain",
              "a plain response is held: %r" % entry["url"])
        check(process.poll() is None, "curl waits for the held plain response")
        status, _ = api(session, "/api/held/%d" % entry["id"], {"action": "execute"})
        check(status == 200, "the plain response's release is accepted: %r" % status)
        code, text = finish_curl(process, out)
        check(code == 0 and text == "good:/late/plain:len=0\n200", "curl gets the plain response as it came: %r" % text)

        # A held response aborted: curl's connection is reset (HTTP/1.1: the proxy offers the client what this
        # http/1.1-only origin speaks; the h2 stream reset is in ResponseBreakpointPlaybooks).
        process, out = start_curl(session, "https://www.tls.test/late/abort")
        entry = held(session, "/late/abort")
        check(entry["phase"] == "response", "the response is held: %r" % entry["phase"])
        status, _ = api(session, "/api/held/%d" % entry["id"], {"action": "abort"})
        check(status == 200, "the response's abort is accepted: %r" % status)
        code, text = finish_curl(process, out)
        check(code != 0 and "late" not in text, "curl's request fails when its response is aborted (exit %d): %r"
              % (code, text[-160:]))
        notes = breakpoint_notes(recorded(session, "/late/abort"))
        check(len(notes) == 1 and notes[0].endswith(" s, aborted") and notes[0].startswith("response held"),
              "the record says the response was aborted: %r" % notes)
        return 0
    except Exception as failure:  # a failed check, or an unexpected error
        print("FAIL %s: %s" % (type(failure).__name__, str(failure).splitlines()[0] if str(failure) else ""),
              flush=True)
        if session:
            print("proxy stderr (end):\n" + open(session.stderr_path, errors="replace").read()[-3000:])
        return 1
    finally:
        if session:
            session.stop()
        shutil.rmtree(folder, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--atsproxy", required=True)
    args = parser.parse_args()
    args.atsproxy = os.path.abspath(args.atsproxy)

    def overall(signum, frame):
        raise Failed("the whole test took more than %d s" % OVERALL_SECONDS)

    signal.signal(signal.SIGALRM, overall)
    signal.alarm(OVERALL_SECONDS)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
