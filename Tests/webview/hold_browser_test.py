#!/usr/bin/env python3
"""Breakpoints in the web view (issue 34) in a real browser: headless Chromium (Selenium, chromedriver) against
`atsproxy run --web --breakpoint request:host:www.tls.test`, with curl's requests through it to a local TLS origin
on 127.0.0.1.

Checks: curl's request is held and shows at once in the list, marked HELD, with the editor open and a countdown;
a header added and the URL's path changed in the editor, Execute sends the edited request (the origin sees the
header and the path) and curl gets the origin's answer to it; Abort gives curl a connection failure; "Answer
locally" gives curl the response written in the page, and the origin never sees the request; "Break on the next
request to this URL" from an exchange's detail pane holds the next request to that URL; a response held by
`--breakpoint response:text:/hold-response` shows its status and body in the editor, and changed there to a 503
with another body, curl gets exactly that. A screenshot of the editor
at 1280×800 goes to --artifacts. Exits 1 on the first failed check, naming it; every wait is bounded (the whole run
too) and every process it started is stopped.

    hold_browser_test.py --atsproxy .build/debug/atsproxy --artifacts .build/test-artefacts/webview
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_test import Failed, Session, check, click_row, rows, wait_for  # noqa: E402
import navigation  # noqa: E402

from selenium.webdriver.common.by import By  # noqa: E402

OVERALL_SECONDS = 180


class Curl:
    """curl through the proxy, in the background: its request waits at the breakpoint while the page acts."""

    def __init__(self, session, url, folder, name):
        self.out = os.path.join(folder, name + ".out")
        self.err = os.path.join(folder, name + ".err")
        self.process = subprocess.Popen(
            ["curl", "-sS", "-m", "40", "-x", "http://127.0.0.1:%d" % session.port, "--cacert", session.proxy_ca,
             "-w", "\n%{http_code}", url], stdout=open(self.out, "wb"), stderr=open(self.err, "wb"))

    def result(self):
        """(exit code, stdout, stderr) once curl is done (it bounds itself to 40 s)."""
        code = self.process.wait(timeout=60)
        return code, open(self.out, errors="replace").read(), open(self.err, errors="replace").read()

    def stop(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


def held_editor(driver, path):
    """Waits for the held row of `path` and the editor open on it; returns the held id."""
    held = wait_for(driver, "the held row of %s" % path, lambda d: d.execute_script(
        "const tr = [...document.querySelectorAll('#held-rows tr.held-row')].find(r =>"
        " r.querySelector('.c-path').textContent.startsWith(arguments[0]));"
        " return tr && tr.querySelector('.held-badge') ? tr.dataset.held : null", path))
    wait_for(driver, "the editor on %s" % path, lambda d: d.execute_script(
        "const e = document.getElementById('held-editor'); return e && e.dataset.held === arguments[0]"
        " && e.offsetParent !== null", held))
    return held


def set_value(driver, element, value):
    element.clear()
    element.send_keys(value)


def run(args):
    folder = tempfile.mkdtemp(prefix="atsproxy-webview-hold-")
    session = None
    curls = []
    try:
        session = Session(args, folder, ["--breakpoint", "request:host:www.tls.test",
                                         "--breakpoint", "response:text:/hold-response", "--breakpoint-timeout", "45"])
        driver = session.browser()
        navigation.load(driver, session.web)
        wait_for(driver, "the live stream", lambda d: "live" in d.find_element(By.ID, "live").text)

        # Held: the row marked HELD at once, the editor open on it, counting down.
        mark = session.tls_origin.mark()
        first = Curl(session, "https://www.tls.test/hold-me?x=1", folder, "first")
        curls.append(first)
        held_editor(driver, "/hold-me?x=1")
        badge = driver.find_element(By.CSS_SELECTOR, "#held-rows tr.held-row .held-badge")
        check(badge.text == "HELD", "the held request's row is marked HELD")
        color = badge.value_of_css_property("background-color")
        check(color == "rgba(164, 50, 154, 1)", "the HELD mark has its own colour: %s" % color)
        check(session.tls_origin.requests(mark) == [], "the origin has not seen the held request")
        check(first.process.poll() is None, "curl waits for the held request")
        left = driver.find_element(By.CSS_SELECTOR, "#held-editor .held-countdown").text
        check(left.endswith(" s") and 0 < int(left[:-2]) <= 45, "the editor counts down to the deadline: %r" % left)
        check(driver.find_element(By.ID, "held-method").get_attribute("value") == "GET", "the method is editable")
        check(driver.find_element(By.ID, "held-url").get_attribute("value") == "https://www.tls.test/hold-me?x=1",
              "the URL is editable")

        # Edited: a header added, the path changed; then executed.
        driver.find_element(By.CSS_SELECTOR, "#held-form .held-add").click()
        last = driver.find_elements(By.CSS_SELECTOR, "#held-form tr.held-header")[-1]
        set_value(driver, last.find_element(By.CSS_SELECTOR, ".held-name"), "X-Edited")
        set_value(driver, last.find_element(By.CSS_SELECTOR, ".held-value"), "in the browser")
        set_value(driver, driver.find_element(By.ID, "held-url"), "https://www.tls.test/edited?y=2")
        os.makedirs(args.artifacts, exist_ok=True)
        driver.save_screenshot(os.path.join(args.artifacts, "hold-editor.png"))
        driver.find_element(By.ID, "held-execute").click()
        code, out, err = first.result()
        check(code == 0 and out.endswith("\n200") and "/edited?y=2" in out,
              "curl gets the origin's answer to the edited request: %r %r" % (out[-120:], err[-200:]))
        heads = session.tls_origin.heads(mark)
        check([h[1] for h in heads] == [b"/edited?y=2"], "the origin saw the edited path: %r" % [h[1] for h in heads])
        fields = dict((n, v) for n, v in heads[0][2])
        check(fields.get(b"x-edited") == b"in the browser", "the origin saw the added header: %r" % heads[0][2])
        wait_for(driver, "the held row to go", lambda d: not d.find_elements(By.CSS_SELECTOR, "#held-rows tr"))
        check("Sent as edited" in driver.find_element(By.ID, "held-message").text, "the editor says it was sent")

        # Aborted: curl sees its connection fail.
        mark = session.tls_origin.mark()
        second = Curl(session, "https://www.tls.test/abort-me", folder, "second")
        curls.append(second)
        held_editor(driver, "/abort-me")
        driver.find_element(By.ID, "held-abort").click()
        code, out, err = second.result()
        check(code != 0 and code not in (28,), "abort gives curl a connection failure: exit %d, %r" % (code, err[-200:]))
        check(session.tls_origin.requests(mark) == [], "the aborted request never reached the origin")

        # Answered locally: curl gets the page's response; the origin never sees the request.
        third = Curl(session, "https://www.tls.test/answer-me", folder, "third")
        curls.append(third)
        held_editor(driver, "/answer-me")
        driver.find_element(By.ID, "held-answer-open").click()
        set_value(driver, driver.find_element(By.ID, "held-answer-status"), "503")
        set_value(driver, driver.find_element(By.CSS_SELECTOR, "#held-answer textarea.held-body"), "answered here")
        driver.find_element(By.ID, "held-answer-send").click()
        code, out, err = third.result()
        check(code == 0 and out == "answered here\n503", "curl gets the answer written in the page: %r" % out)
        check(session.tls_origin.requests(mark) == [], "the answered request never reached the origin")

        # A held response: the editor shows the origin's status and body; changed to 503 with another body in the
        # page, curl gets exactly that.
        fifth = Curl(session, "https://api.tls.test/hold-response", folder, "fifth")
        curls.append(fifth)
        held_editor(driver, "/hold-response")
        status_box = driver.find_element(By.ID, "held-response-status")
        body_box = driver.find_element(By.CSS_SELECTOR, "#held-editor textarea.held-body")
        check(status_box.get_attribute("value") == "200", "the editor shows the held response's status: %r"
              % status_box.get_attribute("value"))
        check("/hold-response" in body_box.get_attribute("value"), "the editor shows the held response's body: %r"
              % body_box.get_attribute("value"))
        check(fifth.process.poll() is None, "curl waits for the held response")
        set_value(driver, status_box, "503")
        set_value(driver, body_box, "changed in the page")
        driver.find_element(By.ID, "held-execute").click()
        code, out, err = fifth.result()
        check(code == 0 and out == "changed in the page\n503", "curl gets the response as changed in the page: %r"
              % (out[-120:] + err[-120:]))

        # "Break on the next request to this URL", from the detail pane of an exchange no breakpoint holds.
        got = subprocess.run(
            ["curl", "-sS", "-m", "15", "-x", "http://127.0.0.1:%d" % session.port, "--cacert", session.proxy_ca,
             "https://api.tls.test/next"], timeout=60, check=False, capture_output=True)
        check(got.returncode == 0, "a request to another host is not held")
        row = wait_for(driver, "the row of /next", lambda d: d.execute_script(
            "const tr = [...document.querySelectorAll('#rows tr.row')].find(r =>"
            " r.querySelector('.c-path').textContent === '/next'); return tr ? tr.dataset.id : null"))
        click_row(driver, '#rows tr.row[data-id="%s"]' % row)
        button = wait_for(driver, "the break button", lambda d: (lambda e: e[0] if e else None)(
            d.find_elements(By.ID, "make-breakpoint")))
        driver.execute_script("arguments[0].scrollIntoView();", button)
        button.click()
        made = wait_for(driver, "the breakpoint rule", lambda d: (lambda t: t if "In force" in t or "Not made" in t
                                                                   else None)(d.find_element(By.CSS_SELECTOR, ".break-maker").text))
        check("In force" in made and "breakpoint" in made, "the detail pane made the breakpoint: %r" % made)
        fourth = Curl(session, "https://api.tls.test/next", folder, "fourth")
        curls.append(fourth)
        held_editor(driver, "/next")
        check("web-1" in driver.find_element(By.CSS_SELECTOR, "#held-editor").text,
              "the next request to the URL is held by the rule made in the page")
        driver.save_screenshot(os.path.join(args.artifacts, "hold-editor-break.png"))
        driver.find_element(By.ID, "held-execute").click()
        code, out, err = fourth.result()
        check(code == 0 and out.endswith("\n200"), "executed unchanged, curl gets the origin's answer: %r" % out[-80:])

        logs = [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
        check(not logs, "the page logged no errors: %r" % logs[:3])
        return 0
    except Exception as failure:  # a failed check, or Selenium's own error
        print("FAIL %s: %s" % (type(failure).__name__, str(failure).splitlines()[0] if str(failure) else ""),
              flush=True)
        if session and session.driver:
            try:
                session.driver.save_screenshot(os.path.join(args.artifacts, "hold-failure.png"))
            except Exception as error:  # the browser may be gone
                print("note: no failure screenshot: %s" % error)
        if session:
            print("proxy stderr (end):\n" + open(session.stderr_path, errors="replace").read()[-3000:])
        return 1
    finally:
        for curl in curls:
            curl.stop()
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
