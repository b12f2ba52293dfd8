#!/usr/bin/env python3
"""ATSProxy WireGuard mode benchmark: throughput through the tunnel against the explicit proxy in the same run, and
the proxy's memory with idle peers (issue 35). Needs root (network namespaces, wireguard-go), like the namespace
tests.

Set-up, as Tests/ProxyEndToEndTests/WireGuardModeTests.swift does it: a network namespace (the "device") joined to the
host by a veth pair with a random /30 from 198.18.0.0/15; the origin (nginx, TLS, the bench CA of proxybench.py) on
the host's end of the pair; `atsproxy run --mode regular --mode wireguard:HOST:0 --listen HOST:0` on the same
address, one process serving both the explicit proxy and the tunnel; and Debian's `wireguard-go` in the namespace,
brought up with the configuration the proxy wrote and routed as wg-quick does for `AllowedIPs = 0.0.0.0/0` (its own
UDP carries fwmark 51820; `ip rule add not fwmark 51820 table 51820` sends everything else into the tunnel).

1. Throughput. In the namespace, curl (no proxy settings unless said) fetches a 64 MiB file (MB/s = 10^6 bytes/s,
   curl's size over its total time) and, in one invocation, N sequential 1 KiB requests on one keep-alive
   connection (ms per request: the mean of curl's time_total over requests 2..N, the first one's connection and TLS
   set-up reported apart), by three paths, interleaved in each round (the order rotates from round to round):
     direct   to the origin, no tunnel and no proxy: the same namespace, on a second listener of the same nginx
              whose port a routing rule (`ip rule ... ipproto tcp dport PORT lookup main`, ahead of the tunnel's
              rule) keeps out of the tunnel;
     proxy    through the explicit proxy (`curl -x http://HOST:PORT --cacert` the proxy's CA), its port kept out of
              the tunnel the same way;
     tunnel   through the WireGuard tunnel, no proxy setting, to the origin's address (the proxy intercepts by SNI).
   The proxy's CPU per run (proxy and tunnel rows) is the sum over its threads of /proc/PID/task/*/schedstat
   (the CPU of /proc/PID/stat in nanoseconds rather than 10 ms ticks: a run of 1 KiB requests costs a few ticks),
   read before each run and after the proxy has gone quiet. Ratios are each round's run against the direct (or
   proxy) run of the same round; "rounds" gives the lowest and highest.

2. Memory with idle peers. A second, fresh proxy with `--wireguard-devices P` (the keys are kept, the first device is
   the one above): its RSS and PSS (/proc/PID/smaps_rollup) before any peer; after P wireguard-go devices (one process
   and interface each, its own key and tunnel address, all in the namespace; source-address rules route each
   device's traffic into its own interface) each completed a handshake (a ping to the tunnel address); and after each
   opened one TLS connection through the tunnel to the origin, made one 1 KiB request on it and left it open. The
   reference row: a third fresh proxy with the same options holding P such connections made through its explicit
   proxy. wireguard-go's own memory and CPU (the device side) are not counted.

Usage: benchmarks/wireguard.py [--rounds 5] [--big-mib 64] [--requests 200] [--peers 50]
                               [--binary .build/release/atsproxy] [--quick]
`--quick` is 1 round, an 8 MiB file, 50 requests and 5 peers: a smoke run. Every process it starts is stopped by
pid, the namespace and the veth pair are deleted, also on failure and Ctrl-C.
Needs: nginx (nginx-light), wireguard-go, wg (wireguard-tools), curl, openssl, iproute2, ping; root.
"""
import argparse, os, queue, random, re, shutil, signal, socket, statistics, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from proxybench import make_certs, run, run_nginx, settled_cpu_seconds, task_cpu_seconds, rss_kib  # noqa: E402

IP = shutil.which("ip") or "/usr/sbin/ip"
FWMARK = "51820"
TUNNEL_TABLE = "51820"
NS_PREFIX = "atspwb"


class Interrupted(Exception):
    pass


def on_signal(signum, frame):
    raise Interrupted(f"signal {signum}")


class Resources:
    """Everything the run starts or makes, undone in reverse order by `close()`: processes stopped by pid (SIGTERM,
    then SIGKILL after 10 s), wireguard-go's control sockets unlinked, the namespace and the host's end of the pair
    deleted, the temporary folder removed."""

    def __init__(self):
        self.steps = []

    def process(self, proc, name, socket_file=None):
        def stop():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    print(f"   {name} (pid {proc.pid}) ignored SIGTERM: killed", file=sys.stderr)
                    proc.kill()
                    proc.wait(timeout=10)
            if socket_file and os.path.exists(socket_file):
                os.unlink(socket_file)  # wireguard-go leaves it behind when killed
        self.steps.append(stop)
        return proc

    def add(self, undo):
        self.steps.append(undo)

    def close(self):
        while self.steps:
            step = self.steps.pop()
            try:
                step()
            except Exception as e:  # keep undoing the rest
                print(f"   cleanup: {e}", file=sys.stderr)


class Namespace:
    """The device's network namespace and its veth pair, 198.18.x.y/30 (a /30 no interface of the host has yet)."""

    def __init__(self, res):
        taken = run([IP, "-4", "-o", "addr", "show"]).stdout
        for _ in range(100):
            tag = random.randrange(1 << 20)
            base = (tag % 16384) * 4
            self.host = f"198.18.{base // 256}.{base % 256 + 1}"
            self.device = f"198.18.{base // 256}.{base % 256 + 2}"
            if f" {self.host}/" not in taken and f" {self.device}/" not in taken:
                break
        else:
            raise RuntimeError("no free /30 in 198.18.0.0/16")
        self.name = f"{NS_PREFIX}-{os.getpid()}-{tag}"
        host_end, inner = f"wbh{tag}", f"wbn{tag}"
        res.add(lambda: self.remove(host_end))
        for args in [["netns", "add", self.name],
                     ["link", "add", host_end, "type", "veth", "peer", "name", inner],
                     ["link", "set", inner, "netns", self.name],
                     ["addr", "add", f"{self.host}/30", "dev", host_end],
                     ["link", "set", host_end, "up"],
                     ["-n", self.name, "addr", "add", f"{self.device}/30", "dev", inner],
                     ["-n", self.name, "link", "set", inner, "up"],
                     ["-n", self.name, "link", "set", "lo", "up"]]:
            run([IP] + args)

    def exec(self, args):
        return [IP, "netns", "exec", self.name] + args

    def run(self, args, timeout=30, check=True):
        r = subprocess.run(self.exec(args), capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"in the namespace: {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[:300]}")
        return r

    def remove(self, host_end):
        subprocess.run([IP, "netns", "delete", self.name], capture_output=True, timeout=30)
        subprocess.run([IP, "link", "delete", host_end], capture_output=True, timeout=30)  # gone with the namespace
        if self.name in subprocess.run([IP, "netns", "list"], capture_output=True, text=True).stdout:
            print(f"   network namespace {self.name} could not be removed", file=sys.stderr)


def wait_listening(host, port, timeout=20.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout}s")


def tail(path, lines=5):
    """The last lines of a log the run wrote (the folder is removed at the end, so errors quote it)."""
    try:
        with open(path, errors="replace") as f:
            return " | ".join(f.read().strip().splitlines()[-lines:]) or "(empty log)"
    except OSError as e:
        return f"({e})"


def free_port(host):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def start_origin(res, d, host, ports, big_bytes):
    """nginx (one worker) on `ports` of `host`, TLS with the bench CA's leaf for bench.test, serving /big and /1k."""
    os.chmod(d, 0o755)  # nginx's worker drops privileges
    os.makedirs(f"{d}/www", mode=0o755, exist_ok=True)
    with open(f"{d}/www/1k", "wb") as f:
        f.write(os.urandom(1024))
    with open(f"{d}/www/big", "wb") as f:
        for _ in range(big_bytes // (1 << 20)):
            f.write(os.urandom(1 << 20))
    listens = "\n".join(f"    listen {host}:{p} ssl;" for p in ports)
    conf = f"""
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  server {{
{listens}
    ssl_certificate {d}/origin.pem;
    ssl_certificate_key {d}/origin.key;
    ssl_protocols TLSv1.2 TLSv1.3;
    root {d}/www;
  }}
}}
"""
    with open(f"{d}/nginx.conf", "w") as f:
        f.write(conf)
    proc = res.process(subprocess.Popen(["nginx", "-c", f"{d}/nginx.conf", "-g", "daemon off;"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True), "nginx")
    for p in ports:
        wait_listening(host, p)
    return proc


class Proxy:
    """`atsproxy run` serving the explicit proxy on HOST:0 and WireGuard on UDP HOST:0, quiet, trusting the bench CA,
    bench.test mapped to the origin; the ports read from its banner."""

    def __init__(self, res, binary, d, cadir, host, origin_port, devices, log_name):
        self.log = open(f"{d}/{log_name}", "w")
        res.add(self.log.close)
        self.proc = res.process(subprocess.Popen(
            [binary, "run", "--mode", "regular", "--mode", f"wireguard:{host}:0", "--listen", f"{host}:0",
             "--allow-lan", "--allow-open-proxy", "--ca-dir", cadir, "--trust-ca", f"{d}/ca.pem",
             "--map", f"bench.test={host}:{origin_port}", "--threads", "2", "--quiet",
             "--wireguard-devices", str(devices)],
            stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True), log_name)
        self.pid = self.proc.pid
        self.port = self.udp_port = None
        # Its stdout read on a thread for as long as it runs (the banner's QR code must not fill the pipe), the
        # banner's lines handed over with a deadline, so a proxy that hangs silently cannot hang the bench.
        lines = queue.Queue()

        def drain():
            for line in self.proc.stdout:
                lines.put(line)
            lines.put(None)
        threading.Thread(target=drain, daemon=True).start()
        deadline = time.time() + 60
        while self.port is None or self.udp_port is None:
            if time.time() > deadline:
                raise RuntimeError(f"no complete banner from atsproxy in 60 s: {tail(f'{d}/{log_name}')}")
            try:
                line = lines.get(timeout=max(0.1, deadline - time.time()))
            except queue.Empty:
                raise RuntimeError(f"no banner from atsproxy in 60 s: {tail(f'{d}/{log_name}')}")
            if line is None:
                raise RuntimeError(f"atsproxy exited ({self.proc.wait(timeout=10)}) before its banner: "
                                   f"{tail(f'{d}/{log_name}')}")
            m = re.match(r"ATSProxy listening on \S+:(\d+) ", line)
            if m:
                self.port = int(m.group(1))
            m = re.match(r"WireGuard: UDP \S+:(\d+) ", line)
            if m:
                self.udp_port = int(m.group(1))
        wait_listening(host, self.port)
        self.ca = f"{cadir}/atsproxy-ca.pem"

    def cpu(self):
        return task_cpu_seconds(self.pid)

    def settled_cpu(self):
        """The proxy's CPU once it has been quiet for 0.1 s (at most 3 s of waiting), in nanoseconds' resolution."""
        deadline, last = time.time() + 3, self.cpu()
        while time.time() < deadline:
            time.sleep(0.1)
            now = self.cpu()
            if now - last < 0.0005:
                return now
            last = now
        return last

    def memory_kib(self):
        """(RSS, PSS) in KiB; PSS None when smaps_rollup is missing."""
        pss = None
        try:
            with open(f"/proc/{self.pid}/smaps_rollup") as f:
                m = re.search(r"^Pss:\s+(\d+) kB", f.read(), re.M)
                pss = int(m.group(1)) if m else None
        except OSError:
            pass
        return rss_kib(self.pid), pss


class Device:
    """One wireguard-go device in the namespace, configured from `conf` (the proxy's device-k.conf, without the
    wg-quick-only Address and DNS lines), its UDP marked so it stays out of the tunnels."""

    def __init__(self, res, ns, d, conf, number):
        text = open(conf).read()
        self.address = re.search(r"^Address = ([\d.]+)/32", text, re.M).group(1)
        self.tunnel_address = re.search(r"^DNS = ([\d.]+)", text, re.M).group(1)
        self.ifname = f"wb{os.getpid() % 100000}x{number}"
        wg_conf = f"{d}/wg-{number}.conf"
        with open(wg_conf, "w") as f:
            f.write("\n".join(l for l in text.splitlines() if not l.startswith(("Address", "DNS"))) + "\n")
        os.chmod(wg_conf, 0o600)
        self.ns = ns
        self.proc = res.process(subprocess.Popen(
            ns.exec(["wireguard-go", "-f", self.ifname]), stdout=subprocess.DEVNULL,
            stderr=open(f"{d}/wireguard-go-{number}.log", "w"), start_new_session=True),
            f"wireguard-go {self.ifname}", socket_file=f"/var/run/wireguard/{self.ifname}.sock")
        self.wg_conf = wg_conf

    def configure(self):
        deadline = time.time() + 20
        while self.ns.run(["wg", "show", self.ifname], check=False).returncode != 0:
            if self.proc.poll() is not None:
                raise RuntimeError(f"wireguard-go {self.ifname} exited ({self.proc.returncode})")
            if time.time() > deadline:
                raise RuntimeError(f"wireguard-go {self.ifname} did not come up in 20 s")
            time.sleep(0.1)
        for args in [["wg", "setconf", self.ifname, self.wg_conf], ["wg", "set", self.ifname, "fwmark", FWMARK],
                     ["ip", "addr", "add", f"{self.address}/32", "dev", self.ifname],
                     ["ip", "link", "set", self.ifname, "up"]]:
            self.ns.run(args)

    def handshake(self):
        """A ping from the device's address to the proxy's tunnel address: the first packet makes wireguard-go
        initiate. Returns once `wg show` has a handshake time (at most three pings)."""
        for _ in range(3):
            self.ns.run(["ping", "-c", "1", "-W", "2", "-I", self.address, self.tunnel_address], check=False)
            out = self.ns.run(["wg", "show", self.ifname, "latest-handshakes"]).stdout.split()
            if len(out) >= 2 and out[1] != "0":
                return
        raise RuntimeError(f"device {self.ifname} ({self.address}) made no handshake")

    def cpu(self):
        """wireguard-go's CPU so far (the device side's cost, reported apart, never added to the proxy's)."""
        return task_cpu_seconds(self.proc.pid)

    def received_bytes(self):
        out = self.ns.run(["wg", "show", self.ifname, "transfer"]).stdout.split()
        return int(out[1]) if len(out) >= 3 else 0


def curl(ns, args, timeout):
    """curl in the namespace; returns its -w lines split into fields."""
    fmt = "%{http_code} %{size_download} %{time_total} %{time_appconnect} %{num_connects}\\n"
    r = ns.run(["curl", "-sS", "--max-time", str(timeout), "-w", fmt] + args, timeout=timeout + 30, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"curl failed ({r.returncode}): {r.stderr.strip()[:300]}")
    rows = [l.split() for l in r.stdout.splitlines() if l.strip()]
    return [(int(c), int(s), float(t), float(a), int(n)) for c, s, t, a, n in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--big-mib", type=int, default=64)
    ap.add_argument("--requests", type=int, default=200, help="1 KiB requests per curl invocation")
    ap.add_argument("--peers", type=int, default=50)
    ap.add_argument("--binary", default=os.path.join(ROOT, ".build/release/atsproxy"))
    ap.add_argument("--quick", action="store_true", help="1 round, 8 MiB, 50 requests, 5 peers")
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.big_mib, args.requests, args.peers = 1, 8, 50, 5
    if not 1 <= args.peers <= 250 or args.rounds < 1 or args.requests < 2 or args.big_mib < 1:
        sys.exit("--peers 1 to 250, --rounds >= 1, --requests >= 2, --big-mib >= 1")
    if os.geteuid() != 0:
        sys.exit("needs root (network namespaces, wireguard-go), as the namespace tests")
    for tool in ("nginx", "wireguard-go", "wg", "curl", "openssl", "ping"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is missing: apt-get install nginx-light wireguard-go wireguard-tools curl openssl "
                     "iputils-ping")
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"{args.binary} is missing: swift build -c release --product atsproxy")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    res = Resources()
    d = tempfile.mkdtemp(prefix="atsproxy-wgbench-")
    res.add(lambda: shutil.rmtree(d, ignore_errors=True))
    try:
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        make_certs(d)
        ns = Namespace(res)
        host = ns.host
        tunnel_port, direct_port = free_port(host), free_port(host)
        big = args.big_mib << 20
        start_origin(res, d, host, [tunnel_port, direct_port], big)
        cadir = f"{d}/proxy-ca"
        proxy = Proxy(res, args.binary, d, cadir, host, tunnel_port, 1, "proxy.log")
        device = Device(res, ns, d, f"{cadir}/wireguard/device.conf", 1)
        device.configure()
        # As wg-quick for AllowedIPs 0.0.0.0/0, with two ports kept out of the tunnel: the direct listener and the
        # explicit proxy.
        for rule in [["route", "add", "default", "dev", device.ifname, "table", TUNNEL_TABLE],
                     ["rule", "add", "to", f"{host}/32", "ipproto", "tcp", "dport", str(direct_port), "lookup",
                      "main", "pref", "100"],
                     ["rule", "add", "to", f"{host}/32", "ipproto", "tcp", "dport", str(proxy.port), "lookup",
                      "main", "pref", "101"],
                     ["rule", "add", "not", "fwmark", FWMARK, "table", TUNNEL_TABLE, "pref", "32000"]]:
            ns.run(["ip"] + rule)
        device.handshake()

        base = ["--resolve", f"bench.test:{tunnel_port}:{host}", "--resolve", f"bench.test:{direct_port}:{host}"]
        paths = {
            "direct": ["--noproxy", "*", "--cacert", f"{d}/ca.pem"] + base,
            "proxy": ["-x", f"http://{host}:{proxy.port}", "--cacert", proxy.ca],
            "tunnel": ["--noproxy", "*", "--cacert", proxy.ca] + base,
        }
        port_of = {"direct": direct_port, "proxy": tunnel_port, "tunnel": tunnel_port}

        def fetch_big(path):
            before_cpu, before_rx, before_wg = proxy.cpu(), device.received_bytes(), device.cpu()
            (code, size, total, _, _), = curl(ns, paths[path] + ["-o", "/dev/null",
                                                                 f"https://bench.test:{port_of[path]}/big"], 600)
            cpu = proxy.settled_cpu() - before_cpu
            rx = device.received_bytes() - before_rx
            if code != 200 or size != big:
                raise RuntimeError(f"{path}: /big gave {code} with {size} bytes")
            if (path == "tunnel") != (rx >= big):
                raise RuntimeError(f"{path}: the device's tunnel received {rx} bytes during the download")
            return {"value": size / total / 1e6, "cpu": cpu, "device_cpu": device.cpu() - before_wg}

        def fetch_small(path):
            url = f"https://bench.test:{port_of[path]}/1k"
            before_cpu, before_wg = proxy.cpu(), device.cpu()
            rows = curl(ns, paths[path] + sum((["-o", "/dev/null", url] for _ in range(args.requests)), []), 300)
            cpu = proxy.settled_cpu() - before_cpu
            if len(rows) != args.requests or any(c != 200 or s != 1024 for c, s, _, _, _ in rows):
                raise RuntimeError(f"{path}: 1 KiB requests gave {[(c, s) for c, s, _, _, _ in rows][:5]} ...")
            if sum(n for *_, n in rows) != 1:
                raise RuntimeError(f"{path}: curl opened {sum(n for *_, n in rows)} connections, not 1")
            ms = statistics.mean(t for _, _, t, _, _ in rows[1:]) * 1000
            return {"value": ms, "first": rows[0][2] * 1000, "cpu": cpu, "device_cpu": device.cpu() - before_wg}

        # Checked once and warmed: each path with a few 1 KiB requests (minted leaf, upstream session, TCP state).
        for path in paths:
            fetch_small(path)
        print(f"check: 1 KiB over the three paths ok; the device's handshake done; origin {host}:{tunnel_port} "
              f"(direct listener :{direct_port}), proxy {host}:{proxy.port}, WireGuard UDP {host}:{proxy.udp_port}")

        order = ["direct", "proxy", "tunnel"]
        big_runs = {p: [] for p in order}
        small_runs = {p: [] for p in order}
        for r in range(args.rounds):
            rotated = order[r % 3:] + order[:r % 3]
            for path in rotated:
                big_runs[path].append(fetch_big(path))
            for path in rotated:
                small_runs[path].append(fetch_small(path))
            print(f"round {r + 1}/{args.rounds}: " + ", ".join(
                f"{p} {big_runs[p][-1]['value']:.0f} MB/s {small_runs[p][-1]['value']:.2f} ms" for p in order),
                flush=True)
        proxy_cpu_total = proxy.cpu()
        # The throughput part's device and proxy go; the memory part starts from a fresh proxy.
        for rule in [["rule", "del", "pref", "32000"], ["rule", "del", "pref", "101"], ["rule", "del", "pref", "100"]]:
            ns.run(["ip"] + rule)
        device.proc.send_signal(signal.SIGTERM)
        device.proc.wait(timeout=10)
        proxy.proc.send_signal(signal.SIGTERM)
        proxy.proc.wait(timeout=30)

        memory = measure_memory(res, args, d, ns, cadir, tunnel_port)

        print_results(args, started, big_runs, small_runs, memory)
    except (Interrupted, KeyboardInterrupt) as e:
        print(f"\nstopped ({str(e) or 'Ctrl-C'}): cleaning up", file=sys.stderr)
        return 130
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        res.close()
    return 0


IDLE_CLIENT = r"""
import socket, ssl, sys
mode, host, port, cafile, proxy_port = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
sources = sys.argv[6:]
ctx = ssl.create_default_context(cafile=cafile)
held = []
for source in sources:
    if mode == "tunnel":
        s = socket.socket()
        s.settimeout(20)
        s.bind((source, 0))
        s.connect((host, port))
    else:
        s = socket.create_connection((host, proxy_port), timeout=20)
        s.sendall(f"CONNECT bench.test:{port} HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = s.recv(4096)
            if not chunk:
                sys.exit("the proxy closed the CONNECT")
            head += chunk
        if b" 200 " not in head.split(b"\r\n")[0]:
            sys.exit(f"CONNECT refused: {head[:80]!r}")
    t = ctx.wrap_socket(s, server_hostname="bench.test")
    t.sendall(f"GET /1k HTTP/1.1\r\nHost: bench.test:{port}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < 1024:
        chunk = t.recv(65536)
        if not chunk or len(data) > 1 << 20:
            sys.exit(f"short response from {source}: {data[:80]!r}")
        data += chunk
    if b" 200 " not in data.split(b"\r\n")[0]:
        sys.exit(f"not 200 through {source}: {data[:80]!r}")
    held.append(t)
print("READY", len(held), flush=True)
sys.stdin.readline()
for t in held:
    t.close()
"""


def hold_connections(res, ns, d, mode, host, origin_port, proxy, sources):
    """Runs the idle client in the namespace: one TLS connection per source address (through the tunnel) or per
    entry (through the explicit proxy), one 1 KiB request on each, then held open. Returns the client process once
    every connection is up; write a line to its stdin to close them."""
    path = f"{d}/idle_client.py"
    with open(path, "w") as f:
        f.write(IDLE_CLIENT)
    proc = res.process(subprocess.Popen(
        ns.exec(["python3", path, mode, host, str(origin_port), proxy.ca, str(proxy.port)] + sources),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True),
        f"idle client ({mode})")
    line = proc.stdout.readline()  # bounded: each connection times out after 20 s
    if not line.startswith("READY"):
        proc.wait(timeout=10)
        raise RuntimeError(f"idle client ({mode}) failed: {proc.stderr.read().strip()[:300]}")
    return proc


def release(proc):
    proc.stdin.write("\n")
    proc.stdin.flush()
    proc.wait(timeout=30)


def measure_memory(res, args, d, ns, cadir, origin_port):
    """The proxy's memory before any peer, after `args.peers` handshakes, and with one idle TLS connection per peer
    through the tunnel; then a fresh proxy holding as many connections through the explicit proxy. KiB."""
    host = ns.host
    proxy = Proxy(res, args.binary, d, cadir, host, origin_port, args.peers, "proxy-memory.log")
    time.sleep(1.0)
    before = proxy.memory_kib()
    devices = [Device(res, ns, d, f"{cadir}/wireguard/" + ("device.conf" if k == 1 else f"device-{k}.conf"), k)
               for k in range(1, args.peers + 1)]
    for k, dev in enumerate(devices, 1):
        dev.configure()
        # Each device's traffic, chosen by its source address, into its own interface.
        ns.run(["ip", "route", "add", "default", "dev", dev.ifname, "table", str(52000 + k)])
        ns.run(["ip", "rule", "add", "from", dev.address, "lookup", str(52000 + k), "pref", str(1000 + k)])
    for dev in devices:
        dev.handshake()
    time.sleep(1.0)
    handshaken = proxy.memory_kib()
    client = hold_connections(res, ns, d, "tunnel", host, origin_port, proxy, [dev.address for dev in devices])
    time.sleep(1.0)  # record buffers are given back 250 ms after a connection goes quiet
    held = proxy.memory_kib()
    sockets = sum(1 for fd in os.listdir(f"/proc/{proxy.pid}/fd")
                  if os.readlink(f"/proc/{proxy.pid}/fd/{fd}").startswith("socket:"))
    release(client)
    proxy.proc.send_signal(signal.SIGTERM)
    proxy.proc.wait(timeout=30)

    # The reference: the same options, a fresh process, the connections through its explicit proxy.
    ref = Proxy(res, args.binary, d, cadir, host, origin_port, args.peers, "proxy-reference.log")
    time.sleep(1.0)
    ref_before = ref.memory_kib()
    client = hold_connections(res, ns, d, "proxy", host, origin_port, ref, [host] * args.peers)
    time.sleep(1.0)
    ref_held = ref.memory_kib()
    release(client)
    ref.proc.send_signal(signal.SIGTERM)
    ref.proc.wait(timeout=30)
    return {"before": before, "handshaken": handshaken, "held": held, "sockets": sockets,
            "ref_before": ref_before, "ref_held": ref_held}


def print_results(args, started, big_runs, small_runs, memory):
    def med(runs, key="value"):
        return statistics.median(r[key] for r in runs)

    def spread(runs, key="value", fmt="{:.0f}"):
        values = [r[key] for r in runs]
        return f"{fmt.format(med(runs, key))} ({fmt.format(min(values))}-{fmt.format(max(values))})"

    def paired(a, b, invert=False):
        """Median and range of each round's b against a (for ms, a over b: higher is faster)."""
        ratios = sorted((x["value"] / y["value"]) if invert else (y["value"] / x["value"]) for x, y in zip(a, b))
        return f"{statistics.median(ratios):.2f}x" + (f" ({ratios[0]:.2f}-{ratios[-1]:.2f})" if len(ratios) > 1 else "")

    print()
    print(f"WireGuard mode against the explicit proxy, {args.rounds} interleaved round(s), {started}; "
          f"median (lowest-highest)")
    print(f"{'case':34} {'direct':>20} {'explicit proxy':>20} {'tunnel':>20} {'proxy/direct':>18} "
          f"{'tunnel/direct':>18} {'tunnel/proxy':>18}")
    d, p, t = big_runs["direct"], big_runs["proxy"], big_runs["tunnel"]
    print(f"{f'{args.big_mib} MiB download (MB/s)':34} {spread(d):>20} {spread(p):>20} {spread(t):>20} "
          f"{paired(d, p):>18} {paired(d, t):>18} {paired(p, t):>18}")
    d, p, t = small_runs["direct"], small_runs["proxy"], small_runs["tunnel"]
    f2 = "{:.2f}"
    print(f"{f'1 KiB keep-alive, ms/request':34} {spread(d, fmt=f2):>20} {spread(p, fmt=f2):>20} "
          f"{spread(t, fmt=f2):>20} {paired(d, p, True):>18} {paired(d, t, True):>18} {paired(p, t, True):>18}")
    rps = {k: 1000 / med(v) for k, v in small_runs.items()}
    print(f"{'  as requests/s (from the medians)':34} {rps['direct']:>20.0f} {rps['proxy']:>20.0f} "
          f"{rps['tunnel']:>20.0f}")
    print(f"{'1 KiB first request (conn+TLS), ms':34} {spread(d, 'first', f2):>20} {spread(p, 'first', f2):>20} "
          f"{spread(t, 'first', f2):>20}")
    print()
    print(f"{'proxy CPU per run':34} {'explicit proxy':>20} {'tunnel':>20} {'tunnel/proxy':>18}")
    for name, runs, unit, per in [(f"{args.big_mib} MiB download", big_runs, "ms/MiB", args.big_mib),
                                  (f"{args.requests} x 1 KiB, one connection", small_runs, "µs/req",
                                   args.requests / 1000)]:
        p, t = runs["proxy"], runs["tunnel"]
        cpu_ratio = sorted(y["cpu"] / x["cpu"] for x, y in zip(p, t) if x["cpu"] > 0)
        ratio = f"{statistics.median(cpu_ratio):.2f}x" if cpu_ratio else "-"
        print(f"{name + ' (s)':34} {spread(p, 'cpu', '{:.3f}'):>20} {spread(t, 'cpu', '{:.3f}'):>20} {ratio:>18}")
        print(f"{'  per ' + unit.split('/')[1] + ' (' + unit.split('/')[0] + ')':34} "
              f"{med(p, 'cpu') * 1000 / per:>20.2f} {med(t, 'cpu') * 1000 / per:>20.2f}")
        print(f"{'  wireguard-go (device side), s':34} {'':>20} {spread(t, 'device_cpu', '{:.3f}'):>20}")
    m, n = memory, args.peers

    def row(label, kib, base, count, what):
        rss, pss = kib
        text = f"  {label:54} RSS {rss:7d} KiB"
        if pss is not None:
            text += f", PSS {pss:7d} KiB"
        if base is not None:
            text += f"   {(rss - base[0]) / count:6.1f} KiB RSS"
            if pss is not None and base[1] is not None:
                text += f", {(pss - base[1]) / count:6.1f} KiB PSS"
            text += f" per {what}"
        print(text)

    print()
    print(f"proxy memory with {n} WireGuard peers (fresh proxy, --wireguard-devices {n}, --threads 2)")
    row("before any peer", m["before"], None, 1, "")
    row(f"{n} devices each completed a handshake", m["handshaken"], m["before"], n, "peer")
    row(f"each with one idle TLS connection (1 request made)", m["held"], m["handshaken"], n, "connection")
    print(f"  {'':54} {m['sockets']} sockets open in the proxy")
    row(f"reference, another fresh proxy: before", m["ref_before"], None, 1, "")
    row(f"  {n} idle connections through its explicit proxy", m["ref_held"], m["ref_before"], n, "connection")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end; origin nginx (1 "
          f"worker), proxy atsproxy --threads 2, device wireguard-go (its CPU and memory not counted), curl; all on "
          f"this host")


if __name__ == "__main__":
    sys.exit(main())
