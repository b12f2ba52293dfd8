#!/usr/bin/env python3
"""The adversarial suite: hostile clients and hostile upstreams on 127.0.0.1 against the built `atsproxy` binary.

Each check runs an attack, then asserts that the proxy is still running, that a good client is still served through
it, and that the recording origin received no head or framing that is not strictly valid HTTP/1.1. One line per
check, then `N passed, N failed`; the exit status is 1 when any check failed.

    Tests/adversarial/run.py [--proxy-binary PATH] [--only FAMILY[,FAMILY]] [--list]
"""

import argparse
import importlib
import os
import plistlib
import shutil
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

FAMILIES = ["malformed", "smuggling", "tls", "h2flood", "slowloris", "resets", "selfloop", "credentials",
            "unsolicited", "h2downgrade", "hygiene"]


class Env:
    """What a check gets: the proxy for its family, the origins and the files."""

    def __init__(self, args, folder):
        self.folder = folder
        self.binary = args.proxy_binary
        self.ca_dir = os.path.join(folder, "proxy-ca")
        self.proxy_ca = os.path.join(self.ca_dir, "atsproxy-ca.pem")
        pki = os.path.join(folder, "pki")
        os.makedirs(pki)
        self.test_ca, leaf, key = harness.make_pki(pki)
        self.origin = harness.Origin()
        self.tls_origin = harness.Origin((leaf, key))
        self.hostile = harness.HostileTLSOrigin((leaf, key))
        self.proxy = None
        # Cleartext is allowed to the plain origin's hosts only; everything else keeps Apple's defaults.
        self.plist = os.path.join(folder, "policy.plist")
        with open(self.plist, "wb") as f:
            plistlib.dump({"NSAppTransportSecurity": {"NSExceptionDomains": {"plain.test": {
                "NSIncludesSubdomains": True, "NSExceptionAllowsInsecureHTTPLoads": True}}}}, f)

    def maps(self):
        return ["--plist", self.plist, "--map", "*.plain.test=127.0.0.1:%d" % self.origin.port,
                "--map", "*.tls.test=127.0.0.1:%d" % self.tls_origin.port,
                "--map", "*.bad.test=127.0.0.1:%d" % self.hostile.port]

    def origin_for(self, tls):
        return self.tls_origin if tls else self.origin

    def start_proxy(self, extra, nofile=None):
        self.proxy = harness.Proxy(self.binary, self.folder, self.ca_dir, self.test_ca, self.maps() + extra, nofile)
        return self.proxy

    def start_family_proxy(self, module):
        proxy = self.start_proxy(module.proxy_args(self), getattr(module, "NOFILE", None))
        proxy.auth = getattr(module, "AUTH", None)  # the good client's credentials, when the family sets --auth
        return proxy

    def stop(self):
        if self.proxy:
            self.proxy.stop()
        self.origin.stop()
        self.tls_origin.stop()
        self.hostile.stop()


def run_bounded(fn, timeout, notes=None):
    """Runs fn() in a thread; returns None on success or the failure's text; what fn returns (a figure worth
    printing) goes into `notes`. Every socket in a check has its own
    timeout, so a thread left behind after `timeout` ends by itself."""
    outcome = {}

    def body():
        try:
            note = fn()
            if note and notes is not None:
                notes.append(note)
        except harness.CheckFailed as e:
            outcome["error"] = str(e)
        except Exception as e:  # a check's own bug or an unexpected socket error is a failure with its trace
            outcome["error"] = "%s: %s (%s)" % (type(e).__name__, e, traceback.format_exc(limit=3).strip()[-400:])

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return "did not finish within %d s" % timeout
    return outcome.get("error")


def looks_like_a_crash(error):
    """Whether a failure may be the proxy dying: worth waiting a second for its exit (its backtrace takes time)."""
    return any(word in error for word in ("Connection", "closed", "reset", "Broken", "refused"))


def postconditions(env, proxy, origin_mark, tls_mark):
    """What every check asserts afterwards."""
    if not proxy.alive():
        return "the proxy died: " + proxy.exit_description()
    bad = env.origin.violations(origin_mark) + env.tls_origin.violations(tls_mark)
    if bad:
        return "forwarded what it should not have: " + "; ".join(bad[:3])
    error = run_bounded(lambda: harness.good_client(proxy, env.proxy_ca), 30)
    if error and proxy.died_within(1 if looks_like_a_crash(error) else 0):  # it died serving the good client
        return "the proxy died: " + proxy.exit_description()
    return error


def run_family(env, name, module, results):
    try:
        proxy = env.start_family_proxy(module)
    except RuntimeError as e:
        for check in module.CHECKS:
            report(results, "%s/%s" % (name, check[0]), str(e), 0)
        return
    checks = module.CHECKS
    try:
        if getattr(module, "PARALLEL", False):
            # Checks that mostly wait (slow clients) run side by side; their postconditions run after all.
            mark, tls_mark = env.origin.mark(), env.tls_origin.mark()
            outcomes = {}
            started = time.monotonic()

            notes = {}

            def one(check):
                notes[check[0]] = []
                outcomes[check[0]] = run_bounded(lambda: check[1](env), check[2], notes[check[0]])

            threads = [threading.Thread(target=one, args=(c,), daemon=True) for c in checks]
            for t in threads:
                t.start()
            for t in threads:
                t.join(max(c[2] for c in checks) + 5)
            after = postconditions(env, proxy, mark, tls_mark)
            for check in checks:
                error = outcomes.get(check[0], "did not finish") or after
                report(results, "%s/%s" % (name, check[0]), error, time.monotonic() - started, notes[check[0]])
        else:
            for check_name, fn, timeout in checks:
                started = time.monotonic()
                mark, tls_mark = env.origin.mark(), env.tls_origin.mark()
                notes = []
                error = run_bounded(lambda: fn(env), timeout, notes) if proxy.alive() else None
                if error and proxy.died_within(1 if looks_like_a_crash(error) else 0):  # it died under the check
                    error = "the proxy died: " + proxy.exit_description()
                error = error or postconditions(env, proxy, mark, tls_mark)
                report(results, "%s/%s" % (name, check_name), error, time.monotonic() - started, notes)
                if not proxy.alive() or getattr(module, "FRESH_PROXY", False):
                    proxy.stop()
                    proxy = env.start_family_proxy(module)
    finally:
        proxy.stop()
        env.proxy = None


def report(results, name, error, seconds, notes=()):
    results.append((name, error))
    if error:
        print("FAIL %s (%.1f s): %s" % (name, seconds, error.replace("\n", " ")[:1200]), flush=True)
    else:
        print("ok   %s (%.1f s)%s" % (name, seconds, "".join(": " + n for n in notes)), flush=True)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--proxy-binary", default=os.path.join(root, ".build", "debug", "atsproxy"))
    parser.add_argument("--only", help="comma-separated families: " + ", ".join(FAMILIES))
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (proxy logs) and print it")
    args = parser.parse_args()
    families = FAMILIES
    if args.only:
        families = [f.strip() for f in args.only.split(",") if f.strip()]
        unknown = [f for f in families if f not in FAMILIES]
        if unknown:
            parser.error("unknown families %s (known: %s)" % (unknown, ", ".join(FAMILIES)))
    modules = {f: importlib.import_module("attack_" + f) for f in families}
    if args.list:
        for f in families:
            for check in modules[f].CHECKS:
                print("%s/%s" % (f, check[0]))
        return 0
    if not os.access(args.proxy_binary, os.X_OK):
        parser.error("%s is not an executable: run `swift build` first or pass --proxy-binary" % args.proxy_binary)
    args.proxy_binary = os.path.abspath(args.proxy_binary)
    folder = tempfile.mkdtemp(prefix="atsproxy-adversarial-")
    started = time.monotonic()
    results = []
    env = Env(args, folder)
    try:
        for f in families:
            run_family(env, f, modules[f], results)
    finally:
        env.stop()
        if args.keep:
            print("kept %s" % folder)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    failed = sum(1 for _, e in results if e)
    print("adversarial suite: %d checks in %.0f s" % (len(results), time.monotonic() - started))
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
