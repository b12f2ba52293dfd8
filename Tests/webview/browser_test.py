#!/usr/bin/env python3
"""The web view end to end in a real browser: headless Chromium driven by Selenium (chromedriver), against
`atsproxy run --web` with traffic sent by curl through it to local origins on 127.0.0.1.

Checks: rows appear live as curl's requests finish; the list follows new rows at the bottom and stops following
once scrolled up; a blocked load is a row with its error codes, and its detail shows the app's error, the fix as a
plist fragment, the headers and the trace; the filters (only problems, free text after `/`, verdict) narrow the
list; keyboard selection and Enter open the detail. Screenshots of the list and of the blocked exchange's detail go
to --artifacts. Exits 1 on the first failed check, naming it; every wait is bounded and every process it started
is stopped.

    browser_test.py --atsproxy .build/debug/atsproxy --artifacts .build/test-artefacts/webview
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "adversarial"))
import harness  # noqa: E402
import navigation  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

OVERALL_SECONDS = 240


class Failed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failed(message)
    print("ok   " + message, flush=True)


def wait_for(driver, what, predicate, seconds=15):
    """Waits until `predicate(driver)` is truthy and returns it; fails naming `what`."""
    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.1,
                             ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: predicate(d))
    except Exception as error:  # selenium's TimeoutException, or the predicate's own error
        raise Failed("timed out waiting for %s (%s)" % (what, type(error).__name__))


class Session:
    def __init__(self, args, folder, extra=()):
        """`extra`: more options for `run` (the rules test's `--map-local`)."""
        self.folder = folder
        pki = os.path.join(folder, "pki")
        os.makedirs(pki)
        self.test_ca, leaf, key = harness.make_pki(pki)
        self.origin = harness.Origin()
        self.tls_origin = harness.Origin((leaf, key))
        self.ca_dir = os.path.join(folder, "proxy-ca")
        self.proxy_ca = os.path.join(self.ca_dir, "atsproxy-ca.pem")
        self.stdout_path = os.path.join(folder, "proxy.stdout")
        self.stderr_path = os.path.join(folder, "proxy.stderr")
        command = [args.atsproxy, "run", "--listen", "127.0.0.1:0", "--web", "127.0.0.1:0", "--ca-dir", self.ca_dir,
                   "--trust-ca", self.test_ca, "--threads", "2", "--quiet",
                   "--map", "*.plain.test=127.0.0.1:%d" % self.origin.port,
                   "--map", "*.tls.test=127.0.0.1:%d" % self.tls_origin.port,
                   # The same origin under a name its certificate does not have: a handshake ATS refuses.
                   "--map", "*.other.test=127.0.0.1:%d" % self.tls_origin.port] + list(extra)
        self.proxy = subprocess.Popen(command, cwd=folder, stdout=open(self.stdout_path, "wb"),
                                      stderr=open(self.stderr_path, "wb"))
        self.port = self.web = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.proxy.poll() is None:
            text = open(self.stdout_path, encoding="utf-8", errors="replace").read()
            proxy = re.search(r"ATSProxy listening on 127\.0\.0\.1:(\d+)", text)
            web = re.search(r"Web: +(http://127\.0\.0\.1:\d+/)", text)
            if proxy and web:
                self.port, self.web = int(proxy.group(1)), web.group(1)
                break
            time.sleep(0.05)
        if not self.web:
            raise Failed("the proxy did not start with --web: %s" % open(self.stderr_path).read()[-2000:])
        self.driver = None

    def curl(self, *urls):
        command = ["curl", "-sS", "-o", "/dev/null", "-m", "15", "-x", "http://127.0.0.1:%d" % self.port,
                   "--cacert", self.proxy_ca]
        for url in urls:
            command += [url, "-o", "/dev/null"]
        subprocess.run(command, timeout=60, check=False, capture_output=True)

    def browser(self):
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,800", "--no-proxy-server", "--disable-extensions"):
            options.add_argument(flag)
        service = Service(executable_path="/usr/bin/chromedriver", log_output=os.path.join(self.folder, "driver.log"))
        self.driver = webdriver.Chrome(service=service, options=options)
        self.driver.set_page_load_timeout(30)
        self.driver.set_script_timeout(30)
        # The viewport, not the window, is what the page gets: make it 1280×800.
        inner = self.driver.execute_script("return [window.innerWidth, window.innerHeight]")
        outer = self.driver.get_window_size()
        self.driver.set_window_size(1280 + outer["width"] - inner[0], 800 + outer["height"] - inner[1])
        return self.driver

    def stop(self):
        if self.driver:
            try:
                self.driver.quit()
            except Exception as error:  # the browser may already be gone; the rest must still stop
                print("note: stopping the browser: %s" % error)
        if self.proxy.poll() is None:
            self.proxy.terminate()
            try:
                self.proxy.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proxy.kill()
                self.proxy.wait(timeout=10)
        self.origin.stop()
        self.tls_origin.stop()


def rows(driver):
    return driver.find_elements(By.CSS_SELECTOR, "#rows tr.row")


def click_row(driver, selector):
    """Clicks the row `selector` finds once it is in the middle of the list (not under the table's sticky header),
    finding it again if the list re-rendered it meanwhile."""
    def attempt(d):
        row = d.find_element(By.CSS_SELECTOR, selector)
        d.execute_script("arguments[0].scrollIntoView({block: 'center'});", row)
        row.click()
        return True
    wait_for(driver, "a click on " + selector, attempt)


def list_geometry(driver):
    return driver.execute_script(
        "const l = document.getElementById('list'); return [l.scrollTop, l.scrollHeight, l.clientHeight];")


def run(args):
    folder = tempfile.mkdtemp(prefix="atsproxy-webview-")
    session = None
    try:
        session = Session(args, folder)
        driver = session.browser()
        navigation.load(driver, session.web)
        wait_for(driver, "the page to load its facts", lambda d: "127.0.0.1:%d" % session.port in
                 d.find_element(By.ID, "fact-proxy").text)
        wait_for(driver, "the live stream", lambda d: "live" in d.find_element(By.ID, "live").text)
        check(len(rows(driver)) == 0, "the list starts empty")
        check(driver.find_element(By.ID, "onboarding").get_attribute("href") == "http://127.0.0.1:%d/" % session.port,
              "the header links to the device set-up at the proxy's address")

        # Rows appear live as the exchanges finish.
        session.curl("https://www.tls.test/first", "http://api.plain.test/login?user=qa")
        wait_for(driver, "two live rows", lambda d: len(rows(d)) == 2)
        check(True, "rows appear live while curl sends traffic")
        blocked = driver.find_element(By.CSS_SELECTOR, "#rows tr.row[data-verdict=blocked]")
        check("BLOCKED" in blocked.text and "-1022" in blocked.text and "api.plain.test" in blocked.text,
              "the cleartext load is a BLOCKED row with its -1022 code: %r" % blocked.text)
        good = driver.find_element(By.CSS_SELECTOR, "#rows tr.row[data-verdict=ok]")
        check("ok" in good.text and "200" in good.text and "/first" in good.text,
              "the HTTPS load is an ok row with its status: %r" % good.text)

        # Enough rows to scroll: the list follows the newest at the bottom.
        session.curl(*["https://www.tls.test/page/%d" % i for i in range(60)])
        wait_for(driver, "62 rows", lambda d: len(rows(d)) == 62)
        top, height, client = wait_for(driver, "the list to follow the newest row", lambda d: (
            lambda g: g if g[1] > g[2] and g[0] + g[2] >= g[1] - 4 else None)(list_geometry(d)))
        check(True, "the list scrolls with new rows while it is at the bottom")
        driver.save_screenshot(os.path.join(args.artifacts, "list.png"))
        driver.execute_script("document.getElementById('list').scrollTop = 200;")
        time.sleep(0.3)  # let the scroll event run before more rows come
        session.curl(*["https://www.tls.test/more/%d" % i for i in range(5)])
        wait_for(driver, "67 rows", lambda d: len(rows(d)) == 67)
        check(list_geometry(driver)[0] == 200, "after scrolling up, new rows no longer move the list")

        # A handshake the proxy refused (the certificate names another host) is a row too, with its codes.
        session.curl("https://www.other.test/")
        refused_id, refused = wait_for(driver, "the refused handshake's row", lambda d: next((
            (r.get_attribute("data-id"), r.text) for r in rows(d) if "www.other.test" in r.text), None))
        check("TLS (refused)" in refused and "BLOCKED" in refused and "-1202" in refused,
              "the refused handshake is a BLOCKED row with its -1202 code: %r" % refused)
        click_row(driver, '#rows tr.row[data-id="%s"]' % refused_id)
        wait_for(driver, "the refused handshake's detail", lambda d: "www.other.test" in
                 d.find_element(By.CSS_SELECTOR, "#detail h2").text)
        fix = driver.find_element(By.CSS_SELECTOR, "#detail .fix-summary").text
        check("no Info.plist exception can help" in fix, "its fix says no exception can help: %r" % fix)
        driver.execute_script("const l = document.getElementById('list'); l.scrollTop = l.scrollHeight;")
        body = driver.find_element(By.TAG_NAME, "body")
        body.send_keys(Keys.END)

        # The blocked exchange's detail: the app's error, the fix and its plist, headers, trace.
        click_row(driver, "#rows tr.row[data-verdict=blocked]")
        wait_for(driver, "the blocked load's detail", lambda d: "api.plain.test/login" in d.find_element(
            By.CSS_SELECTOR, "#detail h2").text)
        error = wait_for(driver, "the app's error", lambda d: d.find_element(By.CSS_SELECTOR, "#detail .app-error"))
        check("Code=-1022" in error.text and "NSErrorFailingURLKey=http://api.plain.test/login?user=qa" in error.text,
              "the detail shows the app's NSError: %r" % error.text[:120])
        fix = driver.find_element(By.CSS_SELECTOR, "#detail .fix-plist").text
        check("<key>NSExceptionAllowsInsecureHTTPLoads</key>" in fix and "api.plain.test" in fix,
              "the fix is a plist fragment for the host")
        copy = [b for b in driver.find_elements(By.CSS_SELECTOR, "#detail button.copy") if b.text == "Copy plist"]
        check(len(copy) == 1, "the fix has a copy button")
        heads = " ".join(p.text for p in driver.find_elements(By.CSS_SELECTOR, "#detail pre.head"))
        check("GET /login?user=qa" in heads or "GET http://api.plain.test/login?user=qa" in heads,
              "the detail shows the request head: %r" % heads[:200])
        check("403" in heads, "the detail shows the answer the client got")
        trace = driver.find_element(By.CSS_SELECTOR, "#detail pre.trace").text
        check(len(trace.splitlines()) >= 2, "the detail shows the connection's trace (%d lines)" % len(trace.splitlines()))
        curl = driver.find_element(By.CSS_SELECTOR, "#detail pre.curl").text
        check(("-x http://127.0.0.1:%d" % session.port) in curl and "--cacert" in curl,
              "copy as curl goes through the proxy with its CA: %r" % curl)
        driver.save_screenshot(os.path.join(args.artifacts, "blocked-detail.png"))

        # Filters: only problems, then free text after `/`, then a verdict.
        driver.find_element(By.ID, "filter-problems").click()
        wait_for(driver, "only the problem rows, both blocked", lambda d: [
            r.get_attribute("data-verdict") for r in rows(d)] == ["blocked", "blocked"])
        check(True, "'Only problems' keeps the blocked load and the refused handshake")
        driver.find_element(By.ID, "filter-problems").click()
        wait_for(driver, "all rows again", lambda d: len(rows(d)) == 68)
        driver.find_element(By.ID, "list").click()
        driver.find_element(By.TAG_NAME, "body").send_keys("/")
        check(driver.switch_to.active_element.get_attribute("id") == "filter-text", "'/' focuses the filter")
        driver.switch_to.active_element.send_keys("page/1")
        wait_for(driver, "the text filter to keep the 11 matching URLs", lambda d: (
            lambda texts: len(texts) == 11 and all("/page/1" in t for t in texts))([r.text for r in rows(d)]))
        check(True, "the free-text filter keeps matching URLs only")
        driver.find_element(By.ID, "filter-clear").click()
        wait_for(driver, "all rows after clearing", lambda d: len(rows(d)) == 68)
        driver.find_element(By.CSS_SELECTOR, "#filter-verdict option[value=ok]").click()
        wait_for(driver, "the verdict filter", lambda d: len(rows(d)) == 66)
        check(True, "the verdict filter keeps the ok rows")
        driver.find_element(By.ID, "filter-clear").click()
        wait_for(driver, "all rows after clearing again", lambda d: len(rows(d)) == 68)

        # Keyboard: up and down move the selection, Enter shows it.
        driver.find_element(By.ID, "list").click()
        body = driver.find_element(By.TAG_NAME, "body")
        body.send_keys(Keys.ARROW_DOWN)
        body.send_keys(Keys.ARROW_DOWN)
        path = wait_for(driver, "a selected row", lambda d: d.find_element(
            By.CSS_SELECTOR, "#rows tr.selected td.c-path").text)
        body.send_keys(Keys.ENTER)
        wait_for(driver, "the selected row's detail", lambda d: path in d.find_element(
            By.CSS_SELECTOR, "#detail h2").text)
        check(True, "arrow keys select a row and Enter opens its detail")

        # A window, not the session: past 600 rows the oldest leave the page; scrolling up brings them back.
        # Selecting a row stopped the following; End resumes it.
        body.send_keys(Keys.END)
        wait_for(driver, "End to follow again", lambda d: d.execute_script("return state.follow"))
        session.curl(*["https://www.tls.test/bulk/%d" % i for i in range(700)])
        wait_for(driver, "the newest bulk row", lambda d: "/bulk/699" in rows(d)[-1].text, seconds=60)
        check(len(rows(driver)) <= 600, "with 768 exchanges the page holds at most 600 rows (%d)" % len(rows(driver)))
        for _ in range(10):
            if rows(driver)[0].get_attribute("data-id") == "1":
                break
            driver.execute_script("document.getElementById('list').scrollTop = 0;")
            time.sleep(0.5)
        check(rows(driver)[0].get_attribute("data-id") == "1" and len(rows(driver)) <= 600,
              "scrolling to the top pages back to the first exchange, still at most 600 rows")
        for _ in range(10):
            if "/bulk/699" in rows(driver)[-1].text:
                break
            driver.execute_script("const l = document.getElementById('list'); l.scrollTop = l.scrollHeight;")
            time.sleep(0.5)
        check("/bulk/699" in rows(driver)[-1].text, "scrolling down pages forward to the newest again")

        # The hosts summary.
        driver.find_element(By.ID, "tab-hosts").click()
        wait_for(driver, "the hosts summary", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#hosts-rows tr")) == 3)
        summary = driver.find_element(By.ID, "hosts-rows").text
        check("api.plain.test" in summary and "BLOCKED" in summary and "www.tls.test" in summary and "766" in summary,
              "the summary lists each host with its verdict")
        report = wait_for(driver, "the session report", lambda d: (lambda t: t if "api.plain.test" in t else None)(
            d.find_element(By.ID, "report-body").text), seconds=30)
        check("NSExceptionAllowsInsecureHTTPLoads" in report,
              "the session report names the missing exception for the blocked host")
        # Formatted, not Markdown: tables, and verdicts in words and colour (no emoji, which need an emoji font).
        verdicts = driver.execute_script(
            "return [...document.querySelectorAll('#report-body table.report-table tbody tr')].map(tr => ["
            "tr.cells[0].textContent, tr.cells[1].querySelector('.verdict').textContent,"
            "getComputedStyle(tr.cells[1].querySelector('.verdict')).color])")
        blocked = [v for v in verdicts if v[0] == "api.plain.test"]
        check(blocked and blocked[0][1] == "FAILS" and blocked[0][2] == "rgb(179, 38, 30)",
              "the report's hosts table says FAILS in red for the blocked host: %r" % verdicts)
        check(any(v[1] == "ok" and v[2] == "rgb(23, 105, 43)" for v in verdicts),
              "the report's hosts table says ok in green for a host that passes: %r" % verdicts)
        check(not any(mark in report for mark in ("\u274c", "\u2705", "\u2796", "|---", "###", "**")),
              "the report shows no raw Markdown or emoji")
        check(len(driver.find_elements(By.CSS_SELECTOR, "#report-body .missing pre")) == 1,
              "the missing exception's fix is a plist snippet of its own")
        driver.execute_script("document.getElementById('report').scrollIntoView()")
        driver.save_screenshot(os.path.join(args.artifacts, "report.png"))
        size = driver.get_window_size()
        inner = driver.execute_script("return [window.innerWidth, window.innerHeight]")
        driver.set_window_size(390 + size["width"] - inner[0], 844 + size["height"] - inner[1])
        driver.execute_script("document.getElementById('report').scrollIntoView()")
        overflow = driver.execute_script(
            "const h = document.getElementById('hosts');"
            "return [h.scrollWidth, h.clientWidth, document.getElementById('report').getBoundingClientRect().right,"
            "window.innerWidth]")
        driver.save_screenshot(os.path.join(args.artifacts, "report-phone.png"))
        check(overflow[0] <= overflow[1] and overflow[2] <= overflow[3] + 1,
              "at phone width the tab does not scroll sideways (its tables do, each in its own box): %r" % overflow)
        driver.set_window_size(size["width"], size["height"])
        suggested = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch('/api/report/plist').then(r => r.text()).then(done, e => done('error ' + e));")
        check("<key>api.plain.test</key>" in suggested and "<key>NSAppTransportSecurity</key>" in suggested,
              "the suggested plist downloads as a plist that lets the blocked host through")
        driver.save_screenshot(os.path.join(args.artifacts, "hosts.png"))

        # The proxy's own set-up site: listed apart, marked as the proxy's own, and not in the report.
        session.curl("http://atsproxy.invalid/")
        own = wait_for(driver, "the proxy's own site in the hosts summary", lambda d: [
            r.text for r in d.find_elements(By.CSS_SELECTOR, "#hosts-rows tr.own")] or None)
        check(len(own) == 1 and "atsproxy.invalid" in own[0] and "proxy's own" in own[0],
              "the set-up site is listed apart, marked as the proxy's own: %r" % own)
        check(driver.find_element(By.CSS_SELECTOR, "#hosts-rows tr.own-heading").text.startswith("The proxy's own"),
              "a heading says the rows below are not the app's traffic")
        driver.execute_script("document.getElementById('hosts').scrollTop = 0")
        driver.save_screenshot(os.path.join(args.artifacts, "hosts-own.png"))
        driver.find_element(By.ID, "report-refresh").click()
        # The click shows "Reading the capture…" at once; the report replaces it.
        refreshed = wait_for(driver, "the refreshed report", lambda d: (lambda t: t if "Hosts (" in t else None)(
            d.find_element(By.ID, "report-body").text), seconds=30)
        check("Hosts (3)" in refreshed and "768 exchanges observed" in refreshed and "atsproxy.invalid" not in refreshed,
              "the report leaves the proxy's own site out")

        # The HAR download of the list's filter: HAR 1.2 with the ATS fields.
        driver.find_element(By.ID, "tab-traffic").click()
        driver.find_element(By.ID, "filter-host").send_keys("api.plain.test")
        link = wait_for(driver, "the HAR link for the filter", lambda d: (lambda a: a if a.is_displayed() and
                        "host=api.plain.test" in a.get_attribute("href") else None)(d.find_element(By.ID, "har-link")))
        har = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch(arguments[0]).then(r => r.json()).then(done, e => done({error: String(e)}));",
            link.get_attribute("href"))
        entries = har.get("log", {}).get("entries", [])
        check(har.get("log", {}).get("version") == "1.2" and len(entries) == 1
              and entries[0]["request"]["url"] == "http://api.plain.test/login?user=qa"
              and entries[0].get("_ats", {}).get("verdict") == "blocked",
              "the HAR download is HAR 1.2 with the filtered exchange and its _ats verdict")
        logs = [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
        check(not logs, "the page logged no errors: %r" % logs[:3])
        return 0
    except Exception as failure:  # a failed check, or Selenium's own error (an element missing, a click refused)
        print("FAIL %s: %s" % (type(failure).__name__, str(failure).splitlines()[0] if str(failure) else ""),
              flush=True)
        if session and session.driver:
            try:
                session.driver.save_screenshot(os.path.join(args.artifacts, "failure.png"))
                print("page state: " + session.driver.execute_script(
                    "return JSON.stringify({rows: state.rows.length, first: state.rows.length && state.rows[0].path, "
                    "last: state.rows.length && state.rows[state.rows.length - 1].path, atNewest: state.atNewest, "
                    "follow: state.follow, hasOlder: state.hasOlder, loading: state.loading, "
                    "geometry: [document.getElementById('list').scrollTop, document.getElementById('list').scrollHeight, "
                    "document.getElementById('list').clientHeight]})"))
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
    for name in ("list.png", "blocked-detail.png", "hosts.png", "hosts-own.png", "report.png", "report-phone.png", "failure.png"):
        if os.path.exists(os.path.join(args.artifacts, name)):
            os.remove(os.path.join(args.artifacts, name))

    def overall(signum, frame):
        raise Failed("the whole test took more than %d s" % OVERALL_SECONDS)

    signal.signal(signal.SIGALRM, overall)
    signal.alarm(OVERALL_SECONDS)
    sys.exit(run(args))


if __name__ == "__main__":
    main()
