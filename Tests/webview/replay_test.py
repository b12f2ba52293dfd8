#!/usr/bin/env python3
"""Replay, compose and compare (issue 34), end to end: `atsproxy run --web` with curl's traffic through it to the
recording origins of Tests/adversarial/harness.py, then `atsproxy replay`, the web view's API and headless Chromium
(Selenium, chromedriver; Chromium's own traffic kept off the network by a PAC file, as faults_browser_test.py does).

Checks: a replay's origin receives the same request head and body as the original's (the hop-by-hop and proxy fields
aside; the replay marker never reaches it); an edited replay's origin sees the edit; the new rows name the original
(`replayOf`, `show`'s text); a composed cleartext request gets the verdict the app's policy gives (blocked); in the
browser, Replay makes a row marked "replay of #N", Edit and replay sends the edited header, Compare with original
shows it as the one differing line, and Compose fills its form from a pasted curl command and sends it. Exits 1 on
the first failed check, naming it; every wait is bounded (the whole run too) and every process it started is stopped.

    replay_test.py --atsproxy .build/debug/atsproxy --artifacts .build/test-artefacts/webview
"""

import argparse
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_test import Failed, Session, check, click_row, wait_for  # noqa: E402
import navigation  # noqa: E402
import harness  # noqa: E402  (browser_test put Tests/adversarial on the path)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

OVERALL_SECONDS = 180
# Fields that belong to one connection or to the proxy, not to the request: a replay may differ in these.
HOP = {b"connection", b"keep-alive", b"proxy-connection", b"proxy-authorization", b"te", b"upgrade",
       b"transfer-encoding"}


def api(session, path, body=None):
    request = urllib.request.Request(session.web.rstrip("/") + path, method="POST" if body is not None else "GET")
    data = None
    if body is not None:
        request.add_header("Content-Type", "application/json")
        data = json.dumps(body).encode()
    with urllib.request.urlopen(request, data=data, timeout=40) as response:
        return json.loads(response.read())


def heads_since(origin, mark):
    """(head lines without the hop-by-hop fields, body) of each request the origin received since `mark`, from the
    raw bytes it recorded."""
    out = []
    for connection in origin.since(mark):
        raw = bytes(connection["raw"])
        while raw:
            split = harness.split_head(raw)
            if split is None:
                break
            head, rest = split
            lines = head.split(b"\r\n")
            kept = [lines[0]] + [l for l in lines[1:] if l.split(b":", 1)[0].strip().lower() not in HOP]
            length = next((int(l.split(b":", 1)[1]) for l in lines[1:]
                           if l.split(b":", 1)[0].strip().lower() == b"content-length"), 0)
            out.append((kept, rest[:length]))
            raw = rest[length:]
    return out


def curl(session, *args):
    done = subprocess.run(["curl", "-sS", "-m", "15", "-x", "http://127.0.0.1:%d" % session.port, "--cacert",
                           session.proxy_ca, *args], timeout=60, check=False, capture_output=True)
    return done.stdout.decode("utf-8", "replace")


def newest_id(session, text):
    found = api(session, "/api/exchanges?limit=5&text=" + text)["exchanges"]
    return found[0]["id"] if found else None


def replay_cli(args, capture, exchange, *more):
    done = subprocess.run([args.atsproxy, "replay", capture, str(exchange), *more], timeout=60, check=False,
                          capture_output=True)
    return done.returncode, done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")


def browser(session):
    """Headless Chromium whose every request but the web view's goes to a closed loopback port (a PAC file)."""
    pac = ('function FindProxyForURL(url, host) { return host == "127.0.0.1" ? "DIRECT" : "PROXY 127.0.0.1:9"; }')
    pac_url = "data:application/x-ns-proxy-autoconfig;base64," + base64.b64encode(pac.encode()).decode()
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,800", "--proxy-pac-url=" + pac_url, "--disable-extensions",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--no-default-browser-check", "--disable-default-apps",
                 "--user-data-dir=" + os.path.join(session.folder, "profile")):
        options.add_argument(flag)
    service = Service(executable_path="/usr/bin/chromedriver", log_output=os.path.join(session.folder, "driver.log"))
    session.driver = webdriver.Chrome(service=service, options=options)
    session.driver.set_page_load_timeout(30)
    session.driver.set_script_timeout(30)
    return session.driver


def run(args):
    folder = tempfile.mkdtemp(prefix="atsproxy-replay-")
    session = None
    try:
        session = Session(args, folder)
        capture = api(session, "/api/info")["capturePath"]
        check(api(session, "/api/info")["features"].get("replay") is True, "run --web offers replay")

        # The original: a POST with a body and fields of its own.
        mark = session.tls_origin.mark()
        got = curl(session, "-H", "X-Original: yes", "-H", "Cookie: a=b", "-d", "hello=1",
                   "https://www.tls.test/replay-me?x=1")
        check(got.startswith("good:/replay-me?x=1"), "curl gets the origin's answer: %r" % got)
        original = wait_for(None, "the original's row", lambda _: newest_id(session, "replay-me"))

        # As captured, from the command line, through the running proxy.
        code, out = replay_cli(args, capture, original, "--proxy", "http://127.0.0.1:%d" % session.port)
        check(code == 0 and out.startswith("200 OK"), "atsproxy replay prints the answer's status: %r" % out)
        made = re.search(r"new exchange (\d+) \(replay of #%d\)" % original, out)
        check(made is not None, "atsproxy replay prints the new row's id: %r" % out)
        sent = heads_since(session.tls_origin, mark)
        check(len(sent) == 2, "the origin received the original and the replay (%d requests)" % len(sent))
        check(sent[0] == sent[1], "the replay's origin saw the original's head and body, hop-by-hop fields aside:\n"
              "%r\n%r" % (sent[0], sent[1]))
        check(not any(b"replay-of" in l.lower() for l in sent[1][0]), "the replay marker never reaches the origin")
        row = api(session, "/api/exchanges/%s" % made.group(1))["exchange"]
        check(row.get("replayOf") == original, "the new row names the original: %r" % row.get("replayOf"))
        shown = subprocess.run([args.atsproxy, "show", capture, made.group(1)], timeout=30, capture_output=True)
        check(("Replay of #%d" % original).encode() in shown.stdout, "show prints 'Replay of #%d'" % original)

        # Edited, from the command line: a field added, one removed, another body.
        mark = session.tls_origin.mark()
        code, out = replay_cli(args, capture, original, "--proxy", "http://127.0.0.1:%d" % session.port,
                               "--header", "X-Edited: 1", "--header", "X-Original:", "--data", "edited=22")
        check(code == 0 and "200" in out, "the edited replay is answered: %r" % out)
        (edited_head, edited_body), = heads_since(session.tls_origin, mark)
        names = [l.split(b":", 1)[0].lower() for l in edited_head[1:]]
        check(b"x-edited" in names and b"x-original" not in names and edited_body == b"edited=22",
              "the edited replay's origin saw the edit: %r %r" % (edited_head, edited_body))

        # The same through the web view's API, with the method and URL changed.
        mark = session.tls_origin.mark()
        answer = api(session, "/api/replay", {"exchange": original, "method": "PUT",
                                              "url": "https://www.tls.test/replay-edited"})
        check(answer["status"] == 200 and answer.get("replayOf") == original and answer.get("exchange"),
              "POST /api/replay answers the status and the new row: %r" % answer)
        (api_head, _), = heads_since(session.tls_origin, mark)
        check(api_head[0] == b"PUT /replay-edited HTTP/1.1", "the origin saw the edited method and URL: %r" % api_head[0])

        # Composed: cleartext, which Apple's defaults forbid: the verdict the app would get.
        answer = api(session, "/api/replay", {"method": "GET", "url": "http://www.plain.test/composed"})
        row = api(session, "/api/exchanges/%d" % answer["exchange"])["exchange"]
        check(row["verdict"] == "blocked" and "replayOf" not in row,
              "a composed cleartext request is judged as the app's would be (blocked): %r" % row["verdict"])

        # The browser: Replay, Edit and replay, Compare, Compose.
        driver = browser(session)
        navigation.load(driver, session.web)
        wait_for(driver, "the live stream", lambda d: "live" in d.find_element(By.ID, "live").text)
        click_row(driver, 'tr.row[data-id="%d"]' % original)
        wait_for(driver, "the Replay button", lambda d: d.find_elements(By.ID, "replay-send"))
        driver.find_element(By.ID, "replay-send").click()
        # Once the capture has the new row, the detail pane shows it.
        result = wait_for(driver, "the new exchange's detail", lambda d: "".join(
            e.text for e in d.find_elements(By.CSS_SELECTOR, "#detail .replay-of")), 30)
        check("replay of #%d" % original in result, "the detail of the new exchange says 'replay of #%d'" % original)
        badges = wait_for(driver, "a row marked as a replay", lambda d: d.execute_script(
            "return [...document.querySelectorAll('#rows tr.row .replay-badge')].map(b => b.title)"))
        check(any(b.startswith("replay of #%d" % original) for b in badges), "the list marks the new row: %r" % badges)
        driver.save_screenshot(os.path.join(args.artifacts, "replay-detail.png"))

        click_row(driver, 'tr.row[data-id="%d"]' % original)
        wait_for(driver, "the Edit and replay button", lambda d: d.find_elements(By.ID, "replay-edit"))
        driver.find_element(By.ID, "replay-edit").click()
        headers = wait_for(driver, "the editor", lambda d: d.find_elements(By.ID, "replay-edit-headers"))[0]
        headers.send_keys("\nX-Browser: edited")
        mark = session.tls_origin.mark()
        driver.find_element(By.ID, "replay-edit-send").click()
        wait_for(driver, "the edited replay's detail", lambda d: d.find_elements(By.ID, "compare-original"), 30)
        (browser_head, _), = heads_since(session.tls_origin, mark)
        check(b"X-Browser: edited" in browser_head, "the origin saw the header added in the browser")
        driver.find_element(By.ID, "compare-original").click()
        title = wait_for(driver, "the comparison", lambda d: d.find_elements(By.ID, "compare-title"))[0].text
        check(title.startswith("Compare #%d with #" % original), "Compare with original opens: %r" % title)
        added = driver.execute_script(
            "return [...document.querySelectorAll('table.diff tr.diff-add td:last-child, "
            "table.diff tr.diff-change td:last-child')].map(td => td.textContent)")
        check("X-Browser: edited" in added, "the comparison shows the added header as a differing line: %r" % added)
        summaries = [s.text for s in driver.find_elements(By.CSS_SELECTOR, "#detail summary")]
        check(any(s.startswith("Response body") and "the same" in s for s in summaries),
              "the same response body reads as the same: %r" % summaries)
        driver.save_screenshot(os.path.join(args.artifacts, "compare.png"))

        driver.find_element(By.ID, "compose-open").click()
        pasted = wait_for(driver, "the compose form", lambda d: d.find_elements(By.ID, "compose-curl"))[0]
        pasted.send_keys("curl -x http://127.0.0.1:%d --cacert ca.pem -X PATCH -H 'X-Composed: 1' "
                         "--data-binary '{\"a\": 1}' 'https://www.tls.test/composed-here'" % session.port)
        driver.find_element(By.ID, "compose-from-curl").click()
        check(driver.find_element(By.ID, "compose-method").get_attribute("value") == "PATCH"
              and driver.find_element(By.ID, "compose-url").get_attribute("value")
              == "https://www.tls.test/composed-here", "Compose reads the pasted curl command")
        mark = session.tls_origin.mark()
        driver.find_element(By.ID, "compose-send").click()
        wait_for(driver, "the composed request's row", lambda d: d.find_elements(
            By.CSS_SELECTOR, 'tr.row td.c-path[title*="composed-here"]'), 30)
        (composed_head, composed_body), = heads_since(session.tls_origin, mark)
        check(composed_head[0] == b"PATCH /composed-here HTTP/1.1" and b"X-Composed: 1" in composed_head
              and composed_body == b'{"a": 1}', "the origin got the composed request: %r" % composed_head)
        driver.save_screenshot(os.path.join(args.artifacts, "compose.png"))
        return 0
    except Exception as failure:  # a failed check, or Selenium's own error
        print("FAIL %s: %s" % (type(failure).__name__, str(failure)[:2000]), flush=True)
        if session and session.driver:
            try:
                session.driver.save_screenshot(os.path.join(args.artifacts, "replay-failure.png"))
            except Exception as error:  # the browser may be gone
                print("note: no failure screenshot: %s" % error)
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
    parser.add_argument("--artifacts", required=True)
    args = parser.parse_args()
    args.atsproxy = os.path.abspath(args.atsproxy)
    os.makedirs(args.artifacts, exist_ok=True)

    def overall(signum, frame):
        raise Failed("the whole test took more than %d s" % OVERALL_SECONDS)

    signal.signal(signal.SIGALRM, overall)
    signal.alarm(OVERALL_SECONDS)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
