"""Usage: python3 mirror_tls_client.py PROXY_PORT PROXY_CA strict|lax. Run by MirrorTests (Tests/ProxyEndToEndTests).

A TLS client behind a CONNECT to good.test that trusts the proxy's CA: `strict` with Python's defaults (TLS 1.2 and
up), `lax` accepting TLS 1.0 and OpenSSL security level 0, as a device with weaker settings. Sends one GET over
HTTP/1.0; prints one JSON object: ok, the version and suite negotiated and the status line, or the TLS error.
"""
import json, socket, ssl, sys

if __name__ == "__main__" and (len(sys.argv) < 4 or sys.argv[1] in ("-h", "--help")):
    sys.exit(__doc__)

port, ca, lax = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "lax"
ctx = ssl.create_default_context(cafile=ca)
if lax:
    ctx.minimum_version = ssl.TLSVersion.TLSv1
    ctx.set_ciphers("DEFAULT@SECLEVEL=0")
s = socket.create_connection(("127.0.0.1", port), timeout=20)
s.sendall(b"CONNECT good.test:443 HTTP/1.1\r\nHost: good.test:443\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
try:
    t = ctx.wrap_socket(s, server_hostname="good.test")
    t.sendall(b"GET / HTTP/1.0\r\nHost: good.test\r\n\r\n")
    status = t.recv(64).split(b"\r\n")[0].decode()
    print(json.dumps({"ok": True, "version": t.version(), "cipher": t.cipher()[0], "status": status}))
except ssl.SSLError as e:
    print(json.dumps({"ok": False, "error": str(e)}))
