"""Usage: python3 keepalive_driver.py PROXY_PORT ORIGIN_PORT COUNT CONNECTIONS TAG. Run by the team store's tests (Tests/TeamStoreTests).

Sends COUNT GETs for http://127.0.0.1:ORIGIN_PORT/TAG/i through the proxy over CONNECTIONS keep-alive connections
(http.client, 10 s timeout each); prints the number answered 200 and the slowest request's seconds.
"""
import http.client, sys, threading, time

if __name__ == "__main__" and (len(sys.argv) < 6 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

proxy, origin, count, conns, tag = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ok, slowest, lock = [0], [0.0], threading.Lock()
def worker(w):
    c = http.client.HTTPConnection("127.0.0.1", proxy, timeout=10)
    for i in range(w, count, conns):
        t = time.monotonic()
        try:
            c.request("GET", "http://127.0.0.1:%d/%s/%d" % (origin, tag, i))
            r = c.getresponse()
            r.read()
            good = r.status == 200
        except Exception:
            c.close()
            c = http.client.HTTPConnection("127.0.0.1", proxy, timeout=10)
            good = False
        with lock:
            ok[0] += good
            slowest[0] = max(slowest[0], time.monotonic() - t)
ts = [threading.Thread(target=worker, args=(w,)) for w in range(conns)]
for t in ts: t.start()
for t in ts: t.join()
print(ok[0], slowest[0])
