"""Usage: python3 pinning_client.py ARGUMENTS (below). Run by the end-to-end tests (Tests/ProxyEndToEndTests).

A client that pins one host in code, as an app with a URLSession delegate does: it trusts the proxy's CA (and the
test CA) for every host, but for the pinned host it also compares the served leaf with the one it expects, and
closes the connection at once, before any request, when they differ.
argv: PROXY_PORT CA_BUNDLE PINNED_HOST PIN_SHA256_HEX HOST...; prints one JSON list, one entry per host.
"""
import hashlib, json, socket, ssl, sys

if __name__ == "__main__" and (len(sys.argv) < 5 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)
PORT, BUNDLE, PINNED, PIN = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
out = []
for host in sys.argv[5:]:
    s = socket.create_connection(("127.0.0.1", PORT), timeout=20)
    s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host, host)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk: break
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        out.append({"host": host, "result": "connect " + head.decode(errors="replace")}); s.close(); continue
    ctx = ssl.create_default_context(cafile=BUNDLE)
    t = ctx.wrap_socket(s, server_hostname=host)
    if host == PINNED and hashlib.sha256(t.getpeercert(binary_form=True)).hexdigest() != PIN:
        t.close()
        out.append({"host": host, "result": "refused"}); continue
    t.sendall(("GET /bytes/10 HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host).encode())
    data = b""
    while True:
        chunk = t.recv(65536)
        if not chunk: break
        data += chunk
    t.close()
    out.append({"host": host, "result": data.split(b"\r\n", 1)[0].decode(errors="replace")})
print(json.dumps(out))
