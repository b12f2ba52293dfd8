#!/usr/bin/env python3
"""Whether the web view answers while it exports: serves a capture with `atsproxy view FILE --web`, downloads the
whole capture as HAR (`/api/har`) and meanwhile asks for the list's newest page (`/api/exchanges?limit=100`) every
100 ms, printing how long the export took and the list's median and slowest answer during it.

    benchmarks/webview-export.py --capture FILE [--binary .build/release/atsproxy] [--port 18867]

A large capture to try it on: `benchmarks/webview-query.py --keep FILE` makes one (or copy a capture's rows with its
`expand`).
"""
import argparse, os, statistics, subprocess, threading, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capture", required=True)
    ap.add_argument("--binary", default=os.path.join(ROOT, ".build/release/atsproxy"))
    ap.add_argument("--port", type=int, default=18867)
    args = ap.parse_args()
    view = subprocess.Popen([args.binary, "view", args.capture, "--web", "127.0.0.1:%d" % args.port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % args.port
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/api/info", timeout=2).read()
                break
            except OSError:
                time.sleep(0.1)
        export = {}

        def har():
            started = time.monotonic()
            size = len(urllib.request.urlopen(base + "/api/har", timeout=600).read())
            export.update(seconds=time.monotonic() - started, size=size)

        thread = threading.Thread(target=har)
        thread.start()
        time.sleep(0.2)
        waits = []
        while thread.is_alive():
            started = time.monotonic()
            urllib.request.urlopen(base + "/api/exchanges?limit=100", timeout=600).read()
            waits.append(time.monotonic() - started)
            time.sleep(0.1)
        thread.join()
        print("HAR export %.1f s (%d MB); the list during it: %d calls, median %.1f ms, slowest %.1f ms" % (
            export["seconds"], export["size"] >> 20, len(waits), statistics.median(waits) * 1000, max(waits) * 1000))
    finally:
        view.terminate()
        view.wait(timeout=30)


if __name__ == "__main__":
    main()
