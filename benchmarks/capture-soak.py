#!/usr/bin/env python3
"""Capture soak: does the proxy's memory stay flat while it captures a long session?

Pushes N keep-alive exchanges (default 1,000,000; 1 KiB response bodies, kept whole under the default 1 MiB body
cap) through `atsproxy run --capture FILE` with `atsproxy-load`, in segments, and prints the proxy's RSS after 10k,
100k, then every further 100k exchanges, then the capture file's size per exchange (after the proxy stopped and
folded its write-ahead log into the file) and the exchanges, bodies and trace records the file holds.

Everything runs on 127.0.0.1: an nginx origin (as in proxybench.py), the proxy (release build) and the load client;
each is stopped by pid. Usage: benchmarks/capture-soak.py [--exchanges 1000000] [--connections 32] [--plain]
                                  [--binary .build/release/atsproxy] [--keep FILE]
`--plain` sends plain HTTP through the proxy instead of intercepted HTTPS. `--keep FILE` copies the capture there.
`--no-capture` runs the same load without a capture: the reference for the CPU per exchange each segment prints.
"""
import argparse, os, shutil, sqlite3, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxybench as pb  # noqa: E402  (the origin, proxy and load helpers)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchanges", type=int, default=1_000_000)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--plain", action="store_true", help="plain HTTP instead of intercepted HTTPS")
    ap.add_argument("--binary", default=os.path.join(pb.ROOT, ".build/release/atsproxy"))
    ap.add_argument("--load-binary", help="the atsproxy-load client (default: next to --binary)")
    ap.add_argument("--keep", help="copy the capture file here at the end")
    ap.add_argument("--no-capture", action="store_true",
                    help="the same run without --capture: the reference for the CPU per exchange")
    args = ap.parse_args()
    load_binary = args.load_binary or os.path.join(os.path.dirname(args.binary), "atsproxy-load")
    pb.require_tools(("nginx", "openssl"), load_binary)

    d = tempfile.mkdtemp(prefix="atsproxy-soak-")
    procs = []
    try:
        pb.make_certs(d)
        tls_port, http_port, h2_port, proxy_port = pb.free_port(), pb.free_port(), pb.free_port(), pb.free_port()
        procs.append(pb.start_nginx(d, tls_port, http_port, h2_port))
        capture = f"{d}/soak.atscap"
        proxy = pb.start_proxy(args.binary, d, f"{d}/ca", proxy_port, tls_port, h2_port,
                               [] if args.no_capture else ["--capture", capture])
        procs.append(proxy)
        url = f"http://127.0.0.1:{http_port}/1k" if args.plain else f"https://bench.test:{tls_port}/1k"
        address = f"127.0.0.1:{proxy_port}"
        marks = [m for m in [10_000] + list(range(100_000, args.exchanges + 1, 100_000)) if m <= args.exchanges]
        if not marks or marks[-1] != args.exchanges:
            marks.append(args.exchanges)
        print(f"{args.exchanges} keep-alive exchanges of {url} through the proxy "
              f"{'without' if args.no_capture else 'with'} --capture, "
              f"{args.connections} connections; RSS at start {pb.rss_kib(proxy.pid)} KiB", flush=True)
        done = 0
        started = time.time()
        for mark in marks:
            cpu = pb.cpu_seconds(proxy.pid)
            r = pb.load(load_binary, url, mark - done, args.connections, proxy=address)
            if r["errors"] or set(r["codes"]) - {200}:
                print(f"   errors: {r['codes']} {r['errors']}", flush=True)
            # The proxy's CPU (every thread: loops and the capture's writer) over the segment, per exchange.
            per = (pb.cpu_seconds(proxy.pid) - cpu) / (mark - done) * 1e6
            done = mark
            if args.no_capture:
                print(f"after {done:>9} exchanges: RSS {pb.rss_kib(proxy.pid):>7} KiB, {r['rps']:8.0f} req/s and "
                      f"{per:5.1f} µs of proxy CPU per exchange in this segment", flush=True)
                continue
            wal = os.path.getsize(capture + "-wal") if os.path.exists(capture + "-wal") else 0
            print(f"after {done:>9} exchanges: RSS {pb.rss_kib(proxy.pid):>7} KiB, {r['rps']:8.0f} req/s and "
                  f"{per:5.1f} µs of proxy CPU per exchange in this segment, file "
                  f"{os.path.getsize(capture) / 1e6:8.1f} MB + WAL {wal / 1e6:6.1f} MB ({time.time() - started:.0f} s)",
                  flush=True)
        pb.stop_all([proxy])
        procs.remove(proxy)
        if args.no_capture:
            return
        size = os.path.getsize(capture)
        with sqlite3.connect(f"file:{capture}?mode=ro", uri=True) as db:
            exchanges = db.execute("SELECT count(*) FROM exchanges").fetchone()[0]
            bodies = db.execute("SELECT count(*), sum(length(bytes)) FROM bodies").fetchone()
            # Schema step 8 keys body rows by exchange id, in a table of their own.
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'exchange_bodies'").fetchone():
                more = db.execute("SELECT count(*), sum(length(bytes)) FROM exchange_bodies").fetchone()
                bodies = (bodies[0] + more[0], (bodies[1] or 0) + (more[1] or 0))
            traces = db.execute("SELECT count(*) FROM trace_records").fetchone()[0]
            # Schema step 4 keeps trace records several to a row: a JSON array per connection and batch.
            chunks, chunked = 0, 0
            if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'trace_chunks'").fetchone():
                chunks, chunked = db.execute(
                    "SELECT count(*), coalesce(sum(json_array_length(records)), 0) FROM trace_chunks").fetchone()
        print(f"capture file: {size / 1e6:.1f} MB, {exchanges} exchanges ({size / max(1, exchanges):.0f} bytes per "
              f"exchange), {bodies[0]} bodies ({(bodies[1] or 0) / 1e6:.1f} MB of body bytes), "
              f"{traces + chunked} trace records ({chunks} trace chunk rows)")
        if args.keep:
            shutil.copy(capture, args.keep)
    finally:
        pb.stop_all(procs)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
