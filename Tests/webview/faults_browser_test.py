#!/usr/bin/env python3
"""Rules in a real browser (issue 33): headless Chromium (Selenium, chromedriver) browsing through `atsproxy run`
with rules, its own certificate store trusting the proxy's CA (an NSS database in a temporary HOME, as a tester's
machine would after installing the CA).

Checks: a page mocked with --map-local is what the browser shows, and the origin is never asked; --fault expired
makes Chromium show its certificate error page (NET::ERR_CERT_DATE_INVALID); --fault tls1.0 makes it fail with
ERR_SSL_VERSION_OR_CIPHER_MISMATCH; a host with no rule loads from the origin as usual. Each rule is named on the
proxy's console line. Exits 1 on the first failed check, naming it; every wait is bounded and every process it
started is stopped.

    faults_browser_test.py --atsproxy .build/debug/atsproxy --artifacts .build/test-artefacts/webview
"""

import argparse
import base64
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

OVERALL_SECONDS = 150
MOCK_PAGE = "<!doctype html><title>mocked</title><h1 id=mock>Served by map local</h1>"


class Failed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failed(message)
    print("ok   " + message, flush=True)


def wait_until(what, predicate, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise Failed("timed out waiting for %s" % what)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--atsproxy", required=True)
    parser.add_argument("--artifacts", required=True)
    args = parser.parse_args()
    os.makedirs(args.artifacts, exist_ok=True)
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(Failed("over %d s" % OVERALL_SECONDS)))
    signal.alarm(OVERALL_SECONDS)
    folder = tempfile.mkdtemp(prefix="atsproxy-rules-browser-")
    proxy = driver = origin = None
    try:
        pki = os.path.join(folder, "pki")
        os.makedirs(pki)
        test_ca, leaf, key = harness.make_pki(pki)
        origin = harness.Origin((leaf, key))
        with open(os.path.join(folder, "page.html"), "w") as f:
            f.write(MOCK_PAGE)
        ca_dir = os.path.join(folder, "proxy-ca")
        stdout_path = os.path.join(folder, "proxy.stdout")
        command = [args.atsproxy, "run", "--listen", "127.0.0.1:0", "--ca-dir", ca_dir, "--trust-ca", test_ca,
                   "--threads", "2", "--map", "*.tls.test=127.0.0.1:%d" % origin.port,
                   "--map-local", "|mock\\.tls\\.test/|page.html",
                   "--fault", "expired.tls.test=expired", "--fault", "legacy.tls.test=tls1.0"]
        proxy = subprocess.Popen(command, cwd=folder, stdout=open(stdout_path, "wb"),
                                 stderr=open(os.path.join(folder, "proxy.stderr"), "wb"))
        port = wait_until("the proxy to listen", lambda: (re.search(
            r"ATSProxy listening on 127\.0\.0\.1:(\d+)", open(stdout_path, errors="replace").read()) or [None, None])[1],
            30)
        proxy_ca = os.path.join(ca_dir, "atsproxy-ca.pem")

        # Chromium on Linux trusts what the NSS database in $HOME/.pki/nssdb holds.
        home = os.path.join(folder, "home")
        nssdb = os.path.join(home, ".pki", "nssdb")
        os.makedirs(nssdb)
        subprocess.run(["certutil", "-d", "sql:" + nssdb, "-N", "--empty-password"], check=True, timeout=30)
        subprocess.run(["certutil", "-d", "sql:" + nssdb, "-A", "-t", "C,,", "-n", "ATSProxy test CA", "-i", proxy_ca],
                       check=True, timeout=30)
        options = webdriver.ChromeOptions()
        options.binary_location = "/usr/bin/chromium"
        # Only the test's names go to the proxy; anything else Chromium asks for on its own (updates, sign-in)
        # goes to a closed loopback port and fails at once: no test traffic leaves the machine.
        pac = ('function FindProxyForURL(url, host) { return shExpMatch(host, "*.tls.test") ? '
               '"PROXY 127.0.0.1:%s" : "PROXY 127.0.0.1:9"; }' % port)
        pac_url = "data:application/x-ns-proxy-autoconfig;base64," + base64.b64encode(pac.encode()).decode()
        for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,800", "--proxy-pac-url=" + pac_url, "--disable-extensions",
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--no-first-run", "--no-default-browser-check", "--disable-default-apps",
                     "--user-data-dir=" + os.path.join(folder, "profile")):
            options.add_argument(flag)
        environment = dict(os.environ, HOME=home)
        service = Service(executable_path="/usr/bin/chromedriver", env=environment,
                          log_output=os.path.join(folder, "driver.log"))
        driver = webdriver.Chrome(service=service, options=options)
        driver.set_page_load_timeout(30)

        mark = origin.mark()
        navigation.load(driver, "https://mock.tls.test/")
        check(driver.title == "mocked" and "Served by map local" in driver.page_source,
              "the browser shows the page map local serves")
        check(origin.requests(mark) == [], "the origin was never asked for the mocked page")
        driver.save_screenshot(os.path.join(args.artifacts, "rules-mocked.png"))

        navigation.load(driver, "https://www.tls.test/plain")
        check("good:" in driver.page_source, "a host no rule names loads from the origin")

        source = navigation.load(driver, "https://expired.tls.test/")
        driver.save_screenshot(os.path.join(args.artifacts, "rules-fault-expired.png"))
        check("ERR_CERT_DATE_INVALID" in source, "--fault expired: Chromium shows its certificate date error page")

        source = navigation.load(driver, "https://legacy.tls.test/")
        driver.save_screenshot(os.path.join(args.artifacts, "rules-fault-tls10.png"))
        check("ERR_SSL_VERSION_OR_CIPHER_MISMATCH" in source,
              "--fault tls1.0: Chromium fails with ERR_SSL_VERSION_OR_CIPHER_MISMATCH")

        lines = wait_until("the console lines of the rules",
                           lambda: (lambda t: t if "expired" in t and "tls1.0" in t else None)(
                               open(stdout_path, errors="replace").read()))
        check("RULE [--map-local #1] map-local" in lines, "the mocked page's line names its rule")
        check("RULE [--fault #1] fault" in lines and "injected" in lines, "the expired fault's line says injected")
        check("RULE [--fault #2] fault" in lines, "the TLS 1.0 fault's line names its rule")
        return 0
    except Failed as failure:
        print("FAIL " + str(failure), flush=True)
        for name in ("proxy.stdout", "proxy.stderr"):
            path = os.path.join(folder, name)
            if os.path.exists(path):
                print("--- %s (tail)\n%s" % (name, open(path, errors="replace").read()[-3000:]))
        return 1
    finally:
        signal.alarm(0)
        if driver:
            try:
                driver.quit()
            except Exception as error:  # the browser may already be gone; the rest must still stop
                print("note: stopping the browser: %s" % error)
        if proxy and proxy.poll() is None:
            proxy.terminate()
            try:
                proxy.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proxy.kill()
                proxy.wait(timeout=10)
        if origin:
            origin.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
