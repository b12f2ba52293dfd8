#!/usr/bin/env python3
"""The web view's rules (issue 33) in a real browser: headless Chromium (Selenium, chromedriver) against
`atsproxy run --web --map-local …`, with curl's traffic through it to a local TLS origin on 127.0.0.1.

Checks: an exchange answered by `--map-local` is a row with the rule's badge, and its detail lists the rule; the
Rules panel lists the rule in force with its text; switching it off there makes the next request go to the server
(the origin sees it, curl gets the server's body, the row has no badge); a rule made from an exchange's detail pane
("Map local from this response" and "Fail this host like…" with status:503) answers the next request. Exits 1 on the first failed check, naming it;
every wait is bounded (the whole run too) and every process it started is stopped.

    rules_browser_test.py --atsproxy .build/debug/atsproxy --artifacts .build/test-artefacts/webview
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
MOCK = '{"mocked": true}'
RULE = "--map-local #1"


def fetch(session, url):
    """The body curl gets for `url` through the proxy (status appended), bounded."""
    done = subprocess.run(
        ["curl", "-sS", "-m", "15", "-x", "http://127.0.0.1:%d" % session.port, "--cacert", session.proxy_ca,
         "-w", "\n%{http_code}", url], timeout=60, check=False, capture_output=True)
    return done.stdout.decode("utf-8", "replace")


def badges(driver):
    """(row id, [badge text…]) per row, read in one script: the list re-draws its rows as exchanges arrive, so
    elements found one call earlier may be gone."""
    return [tuple(r) for r in driver.execute_script(
        "return [...document.querySelectorAll('#rows tr.row')].map(tr => [tr.dataset.id,"
        " [...tr.querySelectorAll('.rule-badge')].map(b => b.textContent)])")]


def run(args):
    folder = tempfile.mkdtemp(prefix="atsproxy-webview-rules-")
    session = None
    try:
        mock = os.path.join(folder, "mock.json")
        with open(mock, "w") as f:
            f.write(MOCK)
        session = Session(args, folder, ["--map-local", "|^https://www\\.tls\\.test/profile$|" + mock])
        driver = session.browser()
        navigation.load(driver, session.web)
        wait_for(driver, "the live stream", lambda d: "live" in d.find_element(By.ID, "live").text)

        # Answered by the rule: curl gets the file, the origin sees nothing, the row carries the rule's badge.
        mark = session.tls_origin.mark()
        got = fetch(session, "https://www.tls.test/profile")
        check(got == MOCK + "\n200", "curl gets the mapped file: %r" % got)
        check(session.tls_origin.requests(mark) == [], "the origin was not contacted")
        wait_for(driver, "the mocked row", lambda d: len(rows(d)) == 1)
        mocked_id, shown = badges(driver)[0]
        check(shown == [RULE], "the mocked exchange's row has the rule's badge: %r" % shown)
        click_row(driver, '#rows tr.row[data-id="%s"]' % mocked_id)
        applied = wait_for(driver, "the detail's rules", lambda d: (lambda e: e[0].text if e else None)(
            d.find_elements(By.CSS_SELECTOR, "#detail .applied-rules")))
        check(RULE in applied and "map-local" in applied, "the detail lists the rule that answered: %r" % applied)
        driver.save_screenshot(os.path.join(args.artifacts, "rules-detail.png"))

        # The Rules panel: the rule in force, switched off with its switch.
        driver.find_element(By.ID, "tab-rules").click()
        # The panel re-draws itself when it opens (and after each change): every element is found afresh.
        selector = '#rules-rows tr.rule-row[data-rule="%s"]' % RULE
        text = wait_for(driver, "the rule in the panel", lambda d: (lambda e: e[0].text if e else None)(
            d.find_elements(By.CSS_SELECTOR, selector)))
        check("map-local" in text and "www\\.tls\\.test/profile" in text and "request-head" in text,
              "the panel lists the rule's text and point: %r" % text)
        check(wait_for(driver, "the rule's switch", lambda d: d.find_element(
            By.CSS_SELECTOR, selector + " input.rule-switch").is_selected()), "the rule is on")
        wait_for(driver, "a click on the rule's switch", lambda d: d.find_element(
            By.CSS_SELECTOR, selector + " input.rule-switch").click() or True)
        wait_for(driver, "the switch to take", lambda d: "switched off" in d.find_element(By.ID, "rules-message").text)
        wait_for(driver, "the panel to show the rule off", lambda d: not d.find_element(
            By.CSS_SELECTOR, selector + " input.rule-switch").is_selected())
        check(True, "the panel shows the rule off")
        driver.save_screenshot(os.path.join(args.artifacts, "rules-panel.png"))

        # Switched off: the next request goes to the server, and its row has no badge.
        mark = session.tls_origin.mark()
        got = fetch(session, "https://www.tls.test/profile")
        check("/profile" in got and MOCK not in got and got.endswith("\n200"), "curl gets the server's body: %r" % got)
        check([r[1] for r in session.tls_origin.requests(mark)] == [b"/profile"],
              "the origin received the request once the rule was off")
        driver.find_element(By.ID, "tab-traffic").click()
        wait_for(driver, "the second row", lambda d: len(rows(d)) == 2)
        check(badges(driver)[1][1] == [], "the server's answer has no rule badge")

        # Rules made from the detail pane of the server's answer: map local from its response, then fail its host.
        server_body = got[:-len("\n200")]
        click_row(driver, '#rows tr.row[data-id="%s"]' % badges(driver)[1][0])

        def make(button, made_text):
            def click(d):
                # Found again on each try: the detail pane re-draws as its exchange's record is updated, and an
                # element found one call earlier may be gone (StaleElementReferenceException, retried).
                makers = d.find_elements(By.ID, button)
                if not makers:
                    return None
                d.execute_script("arguments[0].closest('details').open = true; arguments[0].scrollIntoView();"
                                 " document.querySelector('#detail .rule-made').textContent = '';", makers[0])
                makers[0].click()
                return True
            wait_for(driver, "a click on the rule maker " + button, click)
            made = wait_for(driver, "the rule to be made", lambda d: (lambda t: t if t and t != "…" else None)(
                d.find_element(By.CSS_SELECTOR, "#detail .rule-made").text))
            check(made_text in made, "the detail pane made the rule: %r" % made)

        make("make-map-local", "map-local")
        mark = session.tls_origin.mark()
        got = fetch(session, "https://www.tls.test/profile")
        check(got == server_body + "\n200", "map local serves the captured response: %r" % got)
        check(session.tls_origin.requests(mark) == [], "the origin was not contacted")
        wait_for(driver, "the mapped row with the new rule's badge", lambda d: len(rows(d)) == 3
                 and badges(d)[2][1] == ["web-1"])
        check(True, "the mapped row has the new rule's badge")

        driver.find_element(By.CSS_SELECTOR, '#make-fault-kind option[value="status:503"]').click()
        make("make-fault", "fault www.tls.test=status:503")
        mark = session.tls_origin.mark()
        got = fetch(session, "https://www.tls.test/profile")
        check(got.endswith("\n503"), "the next request is answered 503 by the newest rule: %r" % got[-80:])
        check(session.tls_origin.requests(mark) == [], "the origin was not contacted")
        wait_for(driver, "the failed row with the new rule's badge", lambda d: len(rows(d)) == 4
                 and badges(d)[3][1] == ["web-2"])
        check(True, "the injected failure's row has the newest rule's badge")
        driver.find_element(By.ID, "tab-rules").click()
        listed = wait_for(driver, "the made rules in the panel", lambda d: (lambda ids: ids if len(ids) == 3 else None)(
            [r.get_attribute("data-rule") for r in d.find_elements(By.CSS_SELECTOR, "#rules-rows tr.rule-row")]))
        check(listed == ["web-2", "web-1", RULE], "the panel lists the made rules first, newest first: %r" % listed)
        logs = [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
        check(not logs, "the page logged no errors: %r" % logs[:3])
        return 0
    except Exception as failure:  # a failed check, or Selenium's own error
        print("FAIL %s: %s" % (type(failure).__name__, str(failure).splitlines()[0] if str(failure) else ""),
              flush=True)
        if session and session.driver:
            try:
                session.driver.save_screenshot(os.path.join(args.artifacts, "rules-failure.png"))
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
