#!/usr/bin/env python3
"""A/B comparison of two ATSProxy builds or option sets against one local nginx origin, interleaved.

On this kind of machine the host moves a run's speed by a third within minutes, so two builds measured in
separate benchmark runs cannot be told apart. This script starts one nginx origin and two proxies (A and B) side by
side and alternates runs through them (A B, then B A in the next round, so neither side always goes first); each
round's B/A pair shares its minute of the host.

Per run it records, for the proxy under load: requests/s, its CPU per request, its involuntary context switches per
request, the origin nginx's CPU per request, and the whole machine's busy CPU per request (from /proc/stat, both
cores: a change that moves work onto the client or the origin, or that burns CPU waiting, shows there).

Usage: benchmarks/abtest.py [--a-binary PATH] [--b-binary PATH] [--a-arg=ARG ...] [--b-arg=ARG ...]
                            [--case keepalive|latency|download|newconn|resume|idle] [--rounds 8]
                            [--requests 30000] [--idle 1000]
Cases: keepalive, latency (1 conn) and download as proxybench's rows; newconn is hey with a new connection per
request (8 clients), its figures per connection; resume is one Python client making connections one after another
and offering the session of the one before, per connection (it prints how many resumed); idle starts both proxies
afresh each round (a heap, once grown, does not shrink back), holds --idle intercepted connections open on each and
reports the RSS growth per connection in KiB (the "rate" column), not a rate.
Both binaries default to .build/release/atsproxy; the load client is the atsproxy-load next to --a-binary.
Example: benchmarks/abtest.py --a-arg=--yields-before-sleep=0 --b-arg=--yields-before-sleep=12
Needs: nginx (nginx-light), hey (for --case download), openssl, curl.
"""
import argparse, os, shutil, statistics, tempfile, time

from proxybench import (ROOT, cpu_seconds, free_port, hey, idle_intercepted, load, make_certs, new_tls_connections,
                        only_child, raise_file_limit, require_tools, rss_kib, start_nginx, start_proxy, stop_all)


def machine_busy_seconds():
    """Busy CPU time of the whole machine so far, all cores (user, nice, system, irq, softirq and steal)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle, iowait = fields[3], fields[4]
    return (sum(fields[:8]) - idle - iowait) / os.sysconf("SC_CLK_TCK")


def involuntary_switches(pid):
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/status") as f:
            for line in f:
                if line.startswith("nonvoluntary_ctxt_switches"):
                    total += int(line.split()[1])
    return total


def measure(run, requests, proxy_pid, origin_pid):
    """Runs `run()` once and returns its figures per request."""
    before = (cpu_seconds(proxy_pid), cpu_seconds(origin_pid), machine_busy_seconds(), involuntary_switches(proxy_pid))
    result = run()
    after = (cpu_seconds(proxy_pid), cpu_seconds(origin_pid), machine_busy_seconds(), involuntary_switches(proxy_pid))
    per = [(b - a) / requests for a, b in zip(before, after)]
    return {"rate": result["rps"], "proxy_us": per[0] * 1e6, "origin_us": per[1] * 1e6, "machine_us": per[2] * 1e6,
            "switches": per[3], "p50": result["p50"], "errors": result["errors"],
            "codes": result["codes"]}


def main():
    default_binary = os.path.join(ROOT, ".build/release/atsproxy")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a-binary", default=default_binary)
    ap.add_argument("--b-binary", default=default_binary)
    ap.add_argument("--a-arg", action="append", default=[], help="extra argument for proxy A's `atsproxy run`")
    ap.add_argument("--b-arg", action="append", default=[], help="extra argument for proxy B's `atsproxy run`")
    ap.add_argument("--case", choices=["keepalive", "latency", "download", "newconn", "resume", "idle"],
                    default="keepalive")
    ap.add_argument("--idle", type=int, default=1000, help="connections the idle case holds open")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--requests", type=int, default=30000)
    args = ap.parse_args()
    load_binary = os.path.join(os.path.dirname(args.a_binary), "atsproxy-load")
    require_tools(("nginx", "openssl", "curl") + (("hey",) if args.case in ("download", "newconn") else ()),
                  load_binary)
    raise_file_limit(max(4096, 3 * args.idle + 1024))

    d = tempfile.mkdtemp(prefix="atsproxy-ab-")
    procs = []
    try:
        make_certs(d)
        tls_port, http_port, h2_port = free_port(), free_port(), free_port()
        origin = start_nginx(d, tls_port, http_port, h2_port)
        procs.append(origin)
        origin_worker = only_child(origin.pid)
        proxies = {}
        for side, binary, extra in (("A", args.a_binary, args.a_arg), ("B", args.b_binary, args.b_arg)):
            port = free_port()
            proc = start_proxy(binary, d, f"{d}/ca-{side}", port, tls_port, h2_port, extra, f"proxy-{side}.log")
            procs.append(proc)
            proxies[side] = (proc, port)

        if args.case == "keepalive":
            n, unit = args.requests, "req/s"
            url = f"https://bench.test:{tls_port}/1k"
            runner = lambda port, m: load(load_binary, url, m, 32, proxy=f"127.0.0.1:{port}")
        elif args.case == "latency":
            n, unit = max(1000, args.requests // 7), "req/s"
            url = f"https://bench.test:{tls_port}/1k"
            runner = lambda port, m: load(load_binary, url, m, 1, proxy=f"127.0.0.1:{port}")
        elif args.case == "newconn":
            n, unit = max(500, args.requests // 30), "conn/s"
            url = f"https://bench.test:{tls_port}/1k"
            runner = lambda port, m: hey(url, m, 8, proxy=f"http://127.0.0.1:{port}", keepalive=False)
        elif args.case == "resume":
            n, unit = max(100, args.requests // 100), "conn/s"
            resumed = {}

            def runner(port, m):
                side = "A" if port == proxies["A"][1] else "B"
                started = time.time()
                resumed[side] = resumed.get(side, 0) + new_tls_connections(
                    port, tls_port, f"{d}/ca-{side}/atsproxy-ca.pem", m, resume=True)
                return {"rps": m / (time.time() - started), "p50": float("nan"), "errors": "", "codes": {200: m}}
        elif args.case == "idle":
            n, unit = args.idle, "KiB/conn"

            def runner(port, m):
                # A fresh proxy for the side, so each round's growth starts from an unused heap.
                side = "A" if port == proxies["A"][1] else "B"
                old = proxies[side][0]
                stop_all([old])
                procs.remove(old)
                binary, extra = (args.a_binary, args.a_arg) if side == "A" else (args.b_binary, args.b_arg)
                proc = start_proxy(binary, d, f"{d}/ca-{side}", port, tls_port, h2_port, extra, f"proxy-{side}.log")
                procs.append(proc)
                proxies[side] = (proc, port)
                ca = f"{d}/ca-{side}/atsproxy-ca.pem"
                new_tls_connections(port, tls_port, ca, 5, resume=False)  # leaf minted, contexts built
                time.sleep(0.3)
                before = rss_kib(proc.pid)
                socks = idle_intercepted(port, tls_port, ca, m)
                time.sleep(0.5)
                grown = rss_kib(proc.pid) - before
                for sock in socks:
                    sock.close()
                return {"rps": grown / m, "p50": float("nan"), "errors": "", "codes": {200: m}}
        else:
            n, unit = max(100, args.requests // 100), "MiB/s"
            url = f"https://bench.test:{tls_port}/1m"
            runner = lambda port, m: hey(url, m, 4, proxy=f"http://127.0.0.1:{port}")

        for side in ("A", "B"):
            if args.case != "idle":
                runner(proxies[side][1], max(200, n // 10))  # warm-up: leaves minted, TCP and TLS state settled
        rows = {"A": [], "B": []}
        for r in range(args.rounds):
            order = ("A", "B") if r % 2 == 0 else ("B", "A")
            for side in order:
                proc, port = proxies[side]
                if args.case == "idle":
                    rows[side].append(runner(port, n) | {"proxy_us": float("nan"), "origin_us": float("nan"),
                                                         "machine_us": float("nan"), "switches": float("nan")})
                    rows[side][-1]["rate"] = rows[side][-1]["rps"]
                else:
                    rows[side].append(measure(lambda: runner(port, n), n, proc.pid, origin_worker))
            a, b = rows["A"][-1], rows["B"][-1]
            print(f"round {r + 1}: A {a['rate']:9.0f} {unit} {a['proxy_us']:6.1f} µs  |  "
                  f"B {b['rate']:9.0f} {unit} {b['proxy_us']:6.1f} µs  ({'-'.join(order)})", flush=True)

        print()
        print(f"A: {args.a_binary} {' '.join(args.a_arg)}")
        print(f"B: {args.b_binary} {' '.join(args.b_arg)}")
        print(f"case {args.case}, {args.rounds} rounds of {n} requests each side; medians per request "
              f"(download: per 1 MiB response)")
        print(f"{'':6} {unit:>10} {'proxy CPU':>10} {'origin CPU':>11} {'machine CPU':>12} {'invol. sw':>10} "
              f"{'p50 ms':>7}")
        for side in ("A", "B"):
            med = lambda key: statistics.median(x[key] for x in rows[side])
            print(f"{side:6} {med('rate'):10.0f} {med('proxy_us'):8.1f}µs {med('origin_us'):9.1f}µs "
                  f"{med('machine_us'):10.1f}µs {med('switches'):10.3f} {med('p50'):7.2f}")
        for key, label in (("rate", unit), ("proxy_us", "proxy CPU"), ("machine_us", "machine CPU")):
            ratios = sorted(b[key] / a[key] for a, b in zip(rows["A"], rows["B"]))
            print(f"B/A {label:12} paired median {statistics.median(ratios):.3f} "
                  f"(rounds {ratios[0]:.3f}-{ratios[-1]:.3f})")
        if args.case == "resume":
            print(f"resumed client handshakes: A {resumed.get('A', 0)}, B {resumed.get('B', 0)} "
                  f"of {n * (args.rounds + 1)} each")
        for side in ("A", "B"):
            for x in rows[side]:
                if set(x["codes"]) - {200} or x["errors"]:
                    print(f"   {side}: non-200 responses or errors: {x['codes']} {x['errors']}")
    finally:
        stop_all(procs)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
