#!/usr/bin/env python3
"""Web view API latency over a large capture: how long the list's first page (and the other calls the page makes)
take with N exchanges in the store (default 1,000,000).

The store is made from a real capture: `capture-soak.py` pushes --seed keep-alive exchanges (default 10,000)
through `atsproxy run --capture`, then this script copies those rows in SQL until the file holds N exchanges,
spreading them over 50 hosts with one blocked exchange in 97 and one 503 in 89 (so the filters have something to
find). Then it serves the file with `atsproxy view FILE --web` and times each API call over HTTP (curl-like: a new
connection each time, as a page's fetch may), printing the median and the slowest of --repeat calls.

    benchmarks/webview-query.py [--exchanges 1000000] [--seed 10000] [--repeat 20] [--binary .build/release/atsproxy]
                                [--capture FILE]   # use FILE as it is instead of making one
                                [--keep FILE]      # keep the capture made here
"""
import argparse, os, shutil, sqlite3, statistics, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxybench as pb  # noqa: E402


def expand(path, target):
    """Copies the capture's exchanges (and their bodies) until it holds `target`, varying host and verdict."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode = WAL")
    columns = [row[1] for row in db.execute("PRAGMA table_info(exchanges)") if row[1] != "id"]
    seed_max = db.execute("SELECT max(id) FROM exchanges").fetchone()[0]
    seed_n = db.execute("SELECT count(*) FROM exchanges").fetchone()[0]
    body_columns = [row[1] for row in db.execute("PRAGMA table_info(bodies)") if row[1] != "exchange_id"]
    keyed_bodies = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'exchange_bodies'").fetchone() is not None
    copied = seed_n
    while copied < target:
        offset = db.execute("SELECT max(id) FROM exchanges").fetchone()[0]
        take = min(seed_n, target - copied)
        select = ", ".join(
            "'h' || ((id + ?) % 50) || '.test'" if c == "host"
            else "CASE WHEN (id + ?) % 97 = 0 THEN 'blocked' ELSE outcome END" if c == "outcome"
            else "CASE WHEN (id + ?) % 89 = 0 THEN 503 ELSE status END" if c == "status"
            else c for c in columns)
        db.execute(f"INSERT INTO exchanges (id, {', '.join(columns)}) SELECT id + ?, {select} FROM exchanges "
                   f"WHERE id <= ? ORDER BY id LIMIT ?", (offset, offset, offset, offset, seed_max, take))
        db.execute(f"INSERT INTO bodies (exchange_id, {', '.join(body_columns)}) SELECT exchange_id + ?, "
                   f"{', '.join(body_columns)} FROM bodies WHERE exchange_id <= ? AND exchange_id <= ?",
                   (offset, seed_max, take))
        if keyed_bodies:
            # Schema step 8: body rows keyed by exchange id × 2 (+ 1 for the response).
            db.execute("INSERT INTO exchange_bodies (id, bytes, size, truncated) SELECT id + 2 * ?, bytes, size, "
                       "truncated FROM exchange_bodies WHERE id < 2 * (? + 1) AND id < 2 * (? + 1)",
                       (offset, seed_max, take))
        db.commit()
        copied += take
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.execute("PRAGMA journal_mode = DELETE")
    total = db.execute("SELECT count(*) FROM exchanges").fetchone()[0]
    db.close()
    return total


def timed(url):
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
    return (time.perf_counter() - started) * 1000, len(body)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchanges", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--binary", default=os.path.join(pb.ROOT, ".build/release/atsproxy"))
    ap.add_argument("--capture", help="an existing capture to serve as it is")
    ap.add_argument("--keep", help="move the capture made here to FILE at the end")
    args = ap.parse_args()
    d = tempfile.mkdtemp(prefix="atsproxy-webq-")
    view = None
    try:
        if args.capture:
            path = args.capture
        else:
            path = f"{d}/big.atscap"
            subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "capture-soak.py"),
                            "--exchanges", str(args.seed), "--binary", args.binary, "--keep", path],
                           check=True, timeout=1800)
            started = time.time()
            total = expand(path, args.exchanges)
            print(f"expanded to {total} exchanges in {time.time() - started:.0f} s; file "
                  f"{os.path.getsize(path) / 1e6:.0f} MB", flush=True)
        port = pb.free_port()
        view = subprocess.Popen([args.binary, "view", path, "--web", f"127.0.0.1:{port}"],
                                stdout=subprocess.DEVNULL, stderr=open(f"{d}/view.log", "w"))
        pb.wait_port(port, timeout=120)
        base = f"http://127.0.0.1:{port}"
        newest = int(__import__("json").loads(urllib.request.urlopen(base + "/api/info").read())["exchanges"])
        calls = [
            ("first page (200 rows, newest)", "/api/exchanges?limit=200"),
            ("next page (before=newest-5000)", f"/api/exchanges?limit=200&before={newest - 5000}"),
            ("first page, host=h7.test", "/api/exchanges?limit=200&host=h7.test"),
            ("first page, verdict=blocked", "/api/exchanges?limit=200&verdict=blocked"),
            ("first page, status=5xx", "/api/exchanges?limit=200&status=5xx"),
            ("first page, status=2xx", "/api/exchanges?limit=200&status=2xx"),
            ("first page, only problems", "/api/exchanges?limit=200&problems=1"),
            ("first page, text=/1k (every URL)", "/api/exchanges?limit=200&text=/1k"),
            ("stream's look (after=newest)", f"/api/exchanges?limit=201&after={newest}"),
            ("one exchange in full", f"/api/exchanges/{newest}"),
            ("count, no filter", "/api/exchanges/count"),
            ("count, only problems", "/api/exchanges/count?problems=1"),
            ("hosts summary (first, whole file)", "/api/hosts"),
            ("hosts summary (again, incremental)", "/api/hosts"),
            ("first page, text=nomatch (scans all)", "/api/exchanges?limit=200&text=nomatch"),
        ]
        print(f"\n{'call':42} {'median':>9} {'slowest':>9} {'bytes':>9}")
        for name, path_query in calls:
            repeat = 1 if "hosts summary (first" in name else args.repeat
            if "nomatch" in name:
                repeat = min(3, args.repeat)
            times, size = [], 0
            for _ in range(repeat):
                ms, size = timed(base + path_query)
                times.append(ms)
            print(f"{name:42} {statistics.median(times):7.1f} ms {max(times):7.1f} ms {size:9}", flush=True)
        print(f"\nmachine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        if view:
            pb.stop_all([view])
        if args.keep and not args.capture and os.path.exists(f"{d}/big.atscap"):
            shutil.move(f"{d}/big.atscap", args.keep)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
